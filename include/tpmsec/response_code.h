// TPM response codes (Part 2 §6.6): decoding to spec names with their
// handle, session or parameter position.
#ifndef TPMSEC_RESPONSE_CODE_H_
#define TPMSEC_RESPONSE_CODE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tpmsec {

namespace rc {
inline constexpr uint32_t kSuccess = 0x000;
inline constexpr uint32_t kInitialize = 0x100;
inline constexpr uint32_t kFailure = 0x101;
inline constexpr uint32_t kReferenceH0 = 0x910;
inline constexpr uint32_t kHandle = 0x08B;
inline constexpr uint32_t kValue = 0x084;
inline constexpr uint32_t kIntegrity = 0x09F;
inline constexpr uint32_t kBadAuth = 0x0A2;
inline constexpr uint32_t kAuthFail = 0x08E;
inline constexpr uint32_t kSize = 0x095;
inline constexpr uint32_t kContextGap = 0x901;
inline constexpr uint32_t kObjectMemory = 0x902;
inline constexpr uint32_t kSessionMemory = 0x903;
inline constexpr uint32_t kSessionHandles = 0x905;
inline constexpr uint32_t kLocality = 0x907;
inline constexpr uint32_t kYielded = 0x908;
inline constexpr uint32_t kTesting = 0x90A;
inline constexpr uint32_t kRetry = 0x922;
inline constexpr uint32_t kNvUnavailable = 0x923;
inline constexpr uint32_t kCommandCode = 0x143;
inline constexpr uint32_t kCommandSize = 0x142;  // TPM_RC_COMMAND_SIZE
inline constexpr uint32_t kBadTag = 0x01E;       // TPM_RC_BAD_TAG
inline constexpr uint32_t kBadContext = 0x150;
inline constexpr uint32_t kNvDefined = 0x14C;
}  // namespace rc

// The code with its position (handle/session/parameter number) removed, so it
// can be compared with the rc:: constants: base(0x9A2) == rc::kBadAuth.
uint32_t rc_base(uint32_t code);

// Warnings after which the same command may simply be sent again.
bool rc_is_retryable(uint32_t code);

// The session index (0-based) a response code blames for a failed
// authorization: TPM_RC_AUTH_FAIL or TPM_RC_BAD_AUTH in format 1 with the
// session bit set and the parameter bit clear (Part 2 §6.6), or
// TPM_RC_REFERENCE_S0..S6 (the session handle names no session).
std::optional<size_t> rc_failed_session(uint32_t code);

// True when `code` blames one of the command's handles or the command as a
// whole (format zero, a warning, a format-one code with a handle number or
// none), false when it blames one of its sessions (the session bit,
// TPM_RC_REFERENCE_S0..S6) or parameters (Part 2 §6.6).
bool rc_is_about_handle_or_command(uint32_t code);

// The same response code about a command's handle `index` (0-based) instead
// of the one it names: a format-one handle error (TPM_RC_HANDLE + TPM_RC_1,
// Part 2 §6.6) or TPM_RC_REFERENCE_H0..H6 renumbered; any other code as it
// is. How a TPM's answer about one command's handle (a wrapper's read of a
// Name) is given as the error of another command naming that handle.
uint32_t rc_for_handle(uint32_t code, size_t index);

// A format-one code (Part 2 §6.6) about handle `index` (0-based) of the
// handle area, session `index` of the authorization area, or parameter
// `index`: how a resource manager refuses what it will not send.
uint32_t rc_handle_at(size_t index);                 // TPM_RC_HANDLE + handle N
uint32_t rc_session_handle_at(size_t index);         // TPM_RC_HANDLE + session N
uint32_t rc_parameter(uint32_t base, size_t index);  // `base` + parameter N

// "TPM_RC_BAD_AUTH (session 1)", "TPM_RC_RETRY (warning)",
// "TPM_RC_VALUE (parameter 2)", or "0x00012345 (unknown response code)".
std::string describe_rc(uint32_t code);

}  // namespace tpmsec

#endif  // TPMSEC_RESPONSE_CODE_H_
