// `tpmsec serve status`: a running server's state, asked over the server's
// own socket (or a D-Bus connection) and answered by the server itself,
// never by the TPM. The request is a TPM command frame no TPM command can
// be confused with: TPM_ST_NO_SESSIONS, no handles, no parameters, and a
// command code with TPMA_CC's V bit (bit 29: vendor-specific, Part 2 §6.5.2)
// that the server intercepts before the client's front and handle space; a
// frame that is not exactly this one goes on as any other. Answered only to
// root, to the server's own uid and to tss's (the socket's group may hold
// others); anyone else gets TSS2_RESMGR_RC_NOT_PERMITTED. The answer is
// TPM_RC_SUCCESS, TPM_ST_NO_SESSIONS and one TPM2B: the status as JSON
// (docs/serve.md lists its fields).
#ifndef TPMSEC_SERVER_PROTECTED_SERVER_STATUS_H_
#define TPMSEC_SERVER_PROTECTED_SERVER_STATUS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::serve {

inline constexpr uint32_t kStatusCommandCode = 0x20000000u | 0x7473u;  // TPM_CC_V | "ts"
// The answer's bound: a TPM2B's, in a response the serve: transport reads
// (at most 64 KiB).
inline constexpr size_t kMaxStatusBytes = 0xffff;

// The request frame.
Bytes status_request();
// True when `command` is exactly status_request()'s frame.
bool is_status_request(ByteView command);
// The answer carrying `json`; kUsage when it passes kMaxStatusBytes.
Result<Bytes> status_response(std::string_view json);
// The JSON of an answer; kTpm with the code when the server refused, kParse
// when the frame is not an answer of this form (every size bounded).
Result<std::string> read_status_response(ByteView response);

}  // namespace tpmsec::serve

#endif  // TPMSEC_SERVER_PROTECTED_SERVER_STATUS_H_
