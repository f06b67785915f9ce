// `tpmsec emulate PROFILE --port P ...` as a child process on free loopback
// ports (P and P+1, the swtpm protocol's command and control channels), its
// stderr kept in a file of its own temporary directory; stopped by its PID.
// Several connections may use it at once: a test reads the TPM it emulates
// directly while a server holds a connection of its own.
#ifndef TPMSEC_TESTS_SUPPORT_EMULATE_PROCESS_H_
#define TPMSEC_TESTS_SUPPORT_EMULATE_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tpmsec::testing {

class EmulateServer {
 public:
  EmulateServer() = default;
  ~EmulateServer();  // stops it and removes its directory
  EmulateServer(const EmulateServer&) = delete;
  EmulateServer& operator=(const EmulateServer&) = delete;

  // Starts it with `extra` arguments; true once its port accepts (up to 30 s).
  bool start(const std::vector<std::string>& extra, std::string profile = "slb9670");
  // SIGTERM and wait; the exit status (-1 when it had to be killed).
  int stop();
  bool running();

  uint16_t port() const { return port_; }
  // Whether it has accepted the TCP connection of `client` (a socket connected
  // to port()): the kernel's socket for its end (/proc/net/tcp) is one of the
  // process's descriptors (/proc/PID/fd). A connection still waiting in the
  // listen queue has no descriptor yet.
  bool accepted(int client) const;
  std::string dir() const { return dir_; }  // removed with the object
  std::string log() const;
  // tpmsec's TPM string, with the control channel.
  std::string spec() const;
  // A tpm2-tss TCTI configuration for `scheme` (swtpm, mssim).
  std::string tcti(const std::string& scheme = "swtpm") const;

 private:
  pid_t pid_ = -1;
  int exit_code_ = -1;
  uint16_t port_ = 0;
  std::string dir_;
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_EMULATE_PROCESS_H_
