// How a command is described: one declarative definition per command.
//
// A definition is a struct with
//   static constexpr CommandInfo kInfo   -- code, name, handle and auth counts,
//                                           and parameter-encryption eligibility;
//   handles()  -> std::tie of its NamedHandle members (handle area, in order);
//   params()   -> std::tie of its parameters (in order);
//   struct Response { handles() -> std::tie of uint32_t; params() -> std::tie(...); }
// and nothing else: Tpm::run<C>() marshals every command and parses every
// response generically (see tpm.h). Adding a command is adding a definition.
#ifndef TPMSEC_COMMAND_H_
#define TPMSEC_COMMAND_H_

#include <cstdint>
#include <string_view>
#include <tuple>

#include "tpmsec/bytes.h"
#include "tpmsec/wire.h"

namespace tpmsec {

struct CommandInfo {
  uint32_t code;
  std::string_view name;
  uint8_t handle_count;           // handles in the command's handle area
  uint8_t auth_count;             // the first auth_count handles need authorization
  uint8_t response_handle_count;  // handles in the response's handle area
  bool command_param_tpm2b;       // first command parameter is a TPM2B: may be decrypted
  bool response_param_tpm2b;      // first response parameter is a TPM2B: may be encrypted
  // The command changes nothing in the TPM, so the pipeline may resend it
  // after TPM_RC_RETRY/YIELDED/TESTING. Response codes are not authenticated:
  // a forged RETRY after a PCR_Extend executed would make a blind resend
  // extend twice, so commands with effects return the warning to the caller.
  bool retry_safe = false;
  // The response handle names a transient object or session the command
  // created (or, for a session's ContextLoad, brought back). Tpm's handle
  // ledger (handle_ledger.h) checks it before anyone sees it and owns it from
  // then on. A definition with this flag also has created() -> CreatedHandle.
  bool creates_handle = false;
};

// What the response handle of a creating command must be.
struct CreatedHandle {
  uint8_t type = 0;      // its handle type (Part 2 §7.2): transient, HMAC or policy session
  // A session's ContextLoad: a session keeps its handle while saved (Part 1
  // §30), so the response must name exactly this one, and nothing new exists.
  uint32_t reloads = 0;
};

// A handle in a command together with its Name (Part 1 §16), which enters
// cpHash. Names are passed explicitly: tpmsec never fetches one behind the
// caller's back. PCRs, permanent handles and sessions are named by their
// handle bytes; objects and NV indices by nameAlg || H(public area).
struct NamedHandle {
  uint32_t handle = 0;
  Bytes name;

  // A handle whose name is its own four bytes (PCR, permanent, session).
  static NamedHandle of(uint32_t handle) { return {handle, be32(handle)}; }
};

}  // namespace tpmsec

#endif  // TPMSEC_COMMAND_H_
