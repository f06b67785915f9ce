// How a command is described: one declarative definition per command.
//
// A definition is a struct with
//   static constexpr const CommandInfo& kInfo = command_info<CODE>()
//                                        -- its entry in the command table
//                                           (command_table.h): code, name,
//                                           handle and auth counts, and
//                                           parameter-encryption eligibility;
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

// What a command is, as far as framing, sessions and the handle ledger are
// concerned: enough to split any command and its response into header,
// handles, authorization area and parameters, and to know which parameter
// session encryption covers, without knowing the parameters' types.
// Every TPM 2.0 command has one, in command_table.h, written with designated
// initializers; a field left out is zero. Part 3 gives each command's handle
// area, its "Auth Index" annotations and its first parameters; Part 2 §8.9
// (TPMA_CC) the bits a TPM reports for it in TPM_CAP_COMMANDS.
struct CommandInfo {
  uint32_t code = 0;                  // TPM_CC (Part 2 §6.5.2)
  std::string_view name;              // Part 3's name, without "TPM2_"
  uint8_t handle_count = 0;           // handles in the command's handle area (TPMA_CC.cHandles)
  uint8_t auth_count = 0;             // the first auth_count handles need authorization (Part 3 "Auth Index")
  uint8_t response_handle_count = 0;  // handles in the response's handle area (TPMA_CC.rHandle)
  bool command_param_tpm2b = false;   // first command parameter is a TPM2B: may be decrypted (Part 1 §21)
  bool response_param_tpm2b = false;  // first response parameter is a TPM2B: may be encrypted
  // The command takes no authorization area at all: Part 3 allows only the
  // tag TPM_ST_NO_SESSIONS, so not even an audit session may be added.
  bool no_sessions = false;
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
  bool writes_nv = false;        // may write NV memory (TPMA_CC.nv)
  bool extensive = false;        // may flush many objects from TPM memory (TPMA_CC.extensive)
  bool flushes_handles = false;  // the transient objects in its handle area are flushed (TPMA_CC.flushed)
};

// What the response handle of a creating command must be.
struct CreatedHandle {
  uint8_t type = 0;  // its handle type (Part 2 §7.2): transient, HMAC or policy session
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
