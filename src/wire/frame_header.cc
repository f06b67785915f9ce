#include "tpmsec/frame_header.h"

#include <fmt/format.h>

#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {

HeaderRead read_frame_header(ByteView bytes, size_t max_size) {
  HeaderRead out;
  if (bytes.size() < kFrameHeaderBytes) return out;
  out.header.tag = static_cast<uint16_t>(bytes[0] << 8 | bytes[1]);
  out.header.size = load_be32(bytes.data() + 2);
  out.header.code = load_be32(bytes.data() + 6);
  if (out.header.tag != st::kNoSessions && out.header.tag != st::kSessions) {
    out.check = FrameCheck::kBadTag;
  } else if (out.header.size < kFrameHeaderBytes || out.header.size > max_size) {
    out.check = FrameCheck::kBadSize;
  } else {
    out.check = FrameCheck::kOk;
  }
  return out;
}

Result<Bytes> read_stream_frame(const std::function<Status(MutableByteView)>& read, size_t max_size,
                                std::string_view who) {
  Bytes frame(kFrameHeaderBytes);
  TPMSEC_RETURN_IF_ERROR(read(frame));
  // The fields are read whatever the check says; only the size decides here.
  const uint32_t size = read_frame_header(frame, max_size).header.size;
  if (size < kFrameHeaderBytes || size > max_size) {
    return parse_error(
        fmt::format("{} sent a frame of {} bytes (at least {}, at most {})", who, size, kFrameHeaderBytes, max_size));
  }
  frame.resize(size);
  TPMSEC_RETURN_IF_ERROR(read(MutableByteView(frame).subspan(kFrameHeaderBytes)));
  return frame;
}

bool succeeded(ByteView response) {
  HeaderRead r = read_frame_header(response, response.size());
  return r.check == FrameCheck::kOk && r.header.size == response.size() && r.header.code == rc::kSuccess;
}

Bytes error_frame(uint32_t response_code) {
  Bytes b(kFrameHeaderBytes);
  b[0] = static_cast<uint8_t>(st::kNoSessions >> 8);
  b[1] = static_cast<uint8_t>(st::kNoSessions & 0xFF);
  store_be32(b.data() + 2, kFrameHeaderBytes);
  store_be32(b.data() + 6, response_code);
  return b;
}

}  // namespace tpmsec
