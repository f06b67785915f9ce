// The 10-byte header every TPM command and response starts with (TPM 2.0
// Part 1 §18.2: tag, commandSize/responseSize, commandCode/responseCode),
// read from bytes that may be incomplete or hostile: nothing is trusted
// until the tag and the size are checked, and the size is bounded by the
// caller's limit before a byte of the body is read.
#ifndef TPMSEC_FRAME_HEADER_H_
#define TPMSEC_FRAME_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec {

inline constexpr size_t kFrameHeaderBytes = 10;

struct FrameHeader {
  uint16_t tag = 0;
  uint32_t size = 0;  // the whole frame, header included
  uint32_t code = 0;  // command code, or response code
};

enum class FrameCheck {
  kIncomplete,  // fewer than 10 bytes
  kBadTag,      // neither TPM_ST_NO_SESSIONS nor TPM_ST_SESSIONS
  kBadSize,     // below the header's own 10 bytes, or above max_size
  kOk,
};

struct HeaderRead {
  FrameCheck check = FrameCheck::kIncomplete;
  FrameHeader header;  // the fields read (tag and size also when refused)
};

// Reads the header at the start of `bytes` (which may hold more, or less).
HeaderRead read_frame_header(ByteView bytes, size_t max_size);

// True when `response` is a whole response frame (its size as its header
// says) that answers TPM_RC_SUCCESS.
bool succeeded(ByteView response);

// A frame off a stream (a TPM's data channel, a server's socket): its
// header's kFrameHeaderBytes first, then the rest its size says. `read`
// fills exactly the bytes it is given, or fails (its error is returned).
// kParse, nothing more read, when the size is below the header's own or
// above `max_size`; the tag is the reader of the whole frame's to judge (a
// TPM answers a TPM 1.2 tag with TPM_ST_RSP_COMMAND). `who` names the
// stream in the error. The one stream framing of the transports.
Result<Bytes> read_stream_frame(const std::function<Status(MutableByteView)>& read, size_t max_size,
                                std::string_view who);

// A bare response header carrying `response_code` (TPM_ST_NO_SESSIONS, 10
// bytes): how a TPM answers a command it refuses.
Bytes error_frame(uint32_t response_code);

}  // namespace tpmsec

#endif  // TPMSEC_FRAME_HEADER_H_
