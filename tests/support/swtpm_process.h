// Starts a real swtpm on free loopback ports with a fresh state directory (or
// one the test prepared, e.g. with swtpm_setup), and stops it by PID. One per
// test suite: swtpm serves one client at a time.
#ifndef TPMSEC_TESTS_SUPPORT_SWTPM_PROCESS_H_
#define TPMSEC_TESTS_SUPPORT_SWTPM_PROCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace tpmsec::testing {

class SwtpmProcess {
 public:
  SwtpmProcess() = default;
  SwtpmProcess(const SwtpmProcess&) = delete;
  SwtpmProcess& operator=(const SwtpmProcess&) = delete;
  ~SwtpmProcess() { stop(); }

  // Serve this existing state directory (made by swtpm_setup, say) instead of
  // a fresh one. It stays the caller's: stop() does not remove it. Call
  // before start().
  void use_state_dir(std::string dir) { preset_state_dir_ = std::move(dir); }

  // Starts swtpm and waits until its data port accepts connections.
  // Returns false (with error()) when swtpm is not installed or fails to start.
  bool start();
  void stop();

  bool running() const { return pid_ > 0; }
  uint16_t port() const { return port_; }
  uint16_t ctrl_port() const { return ctrl_port_; }
  const std::string& error() const { return error_; }
  // "swtpm:host=127.0.0.1,port=P,ctrl=P+1"
  std::string spec() const;
  // The TCTI string tpm2-tools takes: "swtpm:host=127.0.0.1,port=P".
  std::string tcti() const;

 private:
  void kill_process();

  pid_t pid_ = -1;
  uint16_t port_ = 0;
  uint16_t ctrl_port_ = 0;
  std::string state_dir_;  // a fresh directory of ours, removed by stop()
  std::string preset_state_dir_;
  std::string error_;
};

// A loopback port P such that P and P+1 are both free now (0 if none found),
// for servers with a data and a control port.
uint16_t pick_port_pair();
// A connected TCP socket to 127.0.0.1:port (close-on-exec), or -1.
int connect_loopback(uint16_t port);
// True when something accepts TCP connections on 127.0.0.1:port.
bool can_connect(uint16_t port);

// True when `program` is on PATH.
bool have_program(const std::string& program);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_SWTPM_PROCESS_H_
