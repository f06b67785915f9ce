// A TPM response frame split into its areas (Part 1 §18.7-§18.10): the
// header, the handle area (as many handles as the command's TPMA_CC.rHandle
// says: the command table's response_handle_count), parameterSize and the
// parameters when the tag is TPM_ST_SESSIONS, then the session area's
// TPMS_AUTH_RESPONSE entries. A response is hostile input: the header is
// checked first (frame_header.h), every size is bounded by the frame, and
// nothing is left over. What reads a TPM's answer (Tpm::execute, the
// wrapper, the emulator, tests and fuzzers) reads it here; the command's
// side is command_frame.h.
//
// The reader splits, it does not judge: whether the tag is the one the
// command's sessions call for, and whether there is one entry per session
// sent, the caller checks against what it sent (a missing session area
// would skip response authentication).
#ifndef TPMSEC_RESPONSE_FRAME_H_
#define TPMSEC_RESPONSE_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/result.h"

namespace tpmsec {

struct ResponseAreas {
  FrameHeader header;
  std::vector<uint32_t> handles;    // the response's handle area
  ByteView parameters;              // without parameterSize
  std::vector<AuthEntry> sessions;  // TPMS_AUTH_RESPONSE; empty: TPM_ST_NO_SESSIONS
};

// The areas of `frame`, a whole response (its size as its header says, at
// most `max_size`) to a command with `handle_count` response handles. An
// error response (a code other than TPM_RC_SUCCESS) is its header alone
// (Part 1 §18.10): its areas are empty. kParse when the header does not
// frame it, an error response carries more than its header, a handle,
// parameterSize or an entry does not fit, a session area holds no entry or
// more than `max_sessions`, or bytes are left over.
Result<ResponseAreas> read_response_areas(ByteView frame, uint8_t handle_count, size_t max_size,
                                          size_t max_sessions = 3);

// The handle area alone of `frame`, a whole success response: what an
// intermediary notes of a response it passes on without reading the rest
// (the created handle of a command it did not wrap). kParse when the header
// does not frame it, it is not a success, or the handles do not fit.
Result<std::vector<uint32_t>> read_response_handles(ByteView frame, uint8_t handle_count, size_t max_size);

// A response frame: TPM_ST_SESSIONS, parameterSize and these entries (each a
// whole TPMS_AUTH_RESPONSE, write_auth_entry()) after the parameters, or
// TPM_ST_NO_SESSIONS without parameterSize when there are none. kUsage when
// it would pass `max_size`. An error response is error_frame()
// (frame_header.h).
Result<Bytes> write_response_frame(uint32_t code, std::span<const uint32_t> handles, ByteView parameters,
                                   std::span<const ByteView> sessions, size_t max_size);

}  // namespace tpmsec

#endif  // TPMSEC_RESPONSE_FRAME_H_
