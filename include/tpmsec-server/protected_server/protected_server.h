// `tpmsec serve`'s library part: one TPM served to every program (the
// server layer, tpmsec-server/resource_manager/server.h: a handle space per client) with one
// protected session on every client command (one CommandWrapper,
// tpmsec/wrap.h), its anchor resolved by the protect path (protect.h) as the
// CLI's and the TCTI's are. docs/serve.md ("What stands behind the front
// ends") draws the stack. Owns the TPM's transport, the wrapper and the
// Server; front ends add their sources and clients to server(). Errors: the
// open's as values; a wrapper fault (an unauthenticated, garbled or lost
// answer) goes back to that client as TSS2_RESMGR_RC_GENERAL_FAILURE (strict's
// refusal as NOT_PERMITTED), logged, and the next command gets a session
// anchored afresh, so only the command in flight fails. Not thread-safe
// beyond the Server's own contract (connect()); reload() on the loop's thread.
#ifndef TPMSEC_SERVER_PROTECTED_SERVER_PROTECTED_SERVER_H_
#define TPMSEC_SERVER_PROTECTED_SERVER_PROTECTED_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tpmsec-server/resource_manager/server.h"
#include "tpmsec/protect.h"
#include "tpmsec/result.h"
#include "tpmsec/transport.h"

namespace tpmsec::serve {

// TSS2_RESMGR_RC_* (tpm2-tss tss2_common.h, layer 11): what a client's TSS
// reports for a failure of the resource manager rather than of the TPM.
inline constexpr uint32_t kResmgrGeneralFailure = 0x000B0001;
inline constexpr uint32_t kResmgrNotPermitted = 0x000B000C;

struct ServeRequest {
  // The TPM and its protection (the one grammar: a TPM string with its
  // protection items, parsed by the protect layer). keep and track_handles
  // are the server's own choice.
  ProtectRequest protect;
  server::ServerOptions server;
  // Refuse a client command whose secret would cross the bus in clear
  // (CommandWrapper::set_strict).
  bool strict = false;
};

// What the wrapper did, for the log and for `serve --stats`.
struct ServeCounts {
  uint64_t commands = 0;          // client commands through the wrapper
  uint64_t sessions_started = 0;  // the server's own sessions (1 while nothing fails)
  uint64_t faults = 0;            // answered with a resource-manager error
  uint64_t refused = 0;           // named a handle or session not the client's: refused before the wrapper
};

class ProtectedServer {
 public:
  // Opens request.protect.tpm (device:, swtpm:, mssim:) and serves it.
  static Result<std::unique_ptr<ProtectedServer>> open(ServeRequest request);
  // The same over a TPM the caller opened (an emulated chip, the embedded
  // TPM): `tpm` is the bus; the server owns it.
  static Result<std::unique_ptr<ProtectedServer>> open(ServeRequest request, std::unique_ptr<Transport> tpm);
  ~ProtectedServer();  // closes every client, then flushes the server's session
  ProtectedServer(const ProtectedServer&) = delete;
  ProtectedServer& operator=(const ProtectedServer&) = delete;

  server::Server& server();
  ProtectedTpm& protected_tpm();
  ServeCounts counts() const;
  // SIGHUP's work, on the loop's thread (ServerOptions::tick): the policy
  // file read again and checked (an error leaves the running one in force),
  // its decision for this TPM in the status; a line saying what was read.
  // The running session keeps the tuning it started with.
  Result<std::string> reload();
  // The wrapper's per-command-code report (CommandWrapper::counts_report).
  std::string counts_report() const;
  // The one start-up line: "TPM <string>; anchor: <kind and what it rests
  // on>; session: <salted to what, how>; policy <file> rule '<name>' (line N)".
  std::string startup_line() const;

  class Impl;

 private:
  explicit ProtectedServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Forgets what serve pinned for the TPM `request` names (its state
// directory: request.host, else $TPMSEC_STATE_DIR's), for a package's purge:
// the pinned salt key — evicted from the TPM only when tpmsec made it
// (PersistentSaltKey::created), never one it adopted such as systemd's SRK —
// the EK and first-use pins, and what was kept of the TPM. One line saying
// what was done.
Result<std::string> forget_state(ProtectRequest request);

}  // namespace tpmsec::serve

#endif  // TPMSEC_SERVER_PROTECTED_SERVER_PROTECTED_SERVER_H_
