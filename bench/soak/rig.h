// What the soak (bench/soak) runs its clients against: `tpmsec emulate`
// (a socket TPM, virtual clock), a private dbus-daemon, and `tpmsec serve`
// on both; what it samples of them (serve's RSS and open descriptors, the
// TPM's loaded handles asked of the TPM directly) and what it does to the
// TPM under the running server (a reset: _TPM_Init on the control channel,
// which serve answers with Startup(CLEAR); a stall: the emulator stopped).
#ifndef TPMSEC_BENCH_SOAK_RIG_H_
#define TPMSEC_BENCH_SOAK_RIG_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "soak/client.h"

namespace tpmsec::soak {

struct RigOptions {
  std::string cli;      // the tpmsec program
  std::string profile;  // tpmsec emulate's latency profile
  std::string dir;      // where the sockets, logs and state go
};

// The TPM's handles by kind (TPM_CAP_HANDLES), as the TPM lists them.
struct TpmHandles {
  std::vector<uint32_t> transient, loaded_sessions, saved_sessions;
  size_t total() const { return transient.size() + loaded_sessions.size() + saved_sessions.size(); }
};

class Rig {
 public:
  ~Rig();
  // Starts the three; false with *error when one did not come up.
  bool start(const RigOptions& options, std::string* error);
  std::string socket() const { return dir_ + "/tpm.sock"; }
  std::string serve_log() const { return dir_ + "/serve.log"; }
  pid_t serve_pid() const { return serve_; }

  // /proc/PID/status VmRSS of serve, in KiB; its open descriptors (/proc/PID/fd).
  long rss_kib() const;
  long open_fds() const;
  // Asked of the TPM on a connection of the bench's own; nullopt when it did not answer.
  std::optional<TpmHandles> tpm_handles();
  // serve status --json, asked over the socket as root; empty when refused.
  std::string status();
  // A connection of the bench's own, once serve counts no other client (every
  // closed one seen closed): held open while serve is sampled idle, so both
  // idle samples count the same one connection. nullptr after 60 s.
  std::unique_ptr<Connection> only_client();

  // _TPM_Init (swtpm's CMD_INIT): the TPM loses every session and object and
  // answers TPM_RC_INITIALIZE until someone sends Startup.
  bool reset_tpm();
  // The emulator stopped (SIGSTOP) for `seconds`: it accepts, but answers nothing.
  void stall_tpm(int seconds);
  // SIGTERM to serve; its exit code (128 + signal when killed).
  int stop_serve();

 private:
  bool start_emulator(const RigOptions& o, std::string* error);
  bool start_bus(std::string* error);
  bool start_serve(const RigOptions& o, std::string* error);

  std::string dir_;
  uint16_t port_ = 0;
  pid_t emulator_ = -1, bus_ = -1, serve_ = -1;
  std::unique_ptr<Connection> tpm_;
};

}  // namespace tpmsec::soak

#endif  // TPMSEC_BENCH_SOAK_RIG_H_
