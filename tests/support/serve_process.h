// `tpmsec serve` in a process of its own, as the tests of
// tests/protected_server run it: in a directory of the test's (its socket
// DIR/tpm.sock, its standard error DIR/serve.log, its state directory
// DIR/state), waited for by what it shows (its start-up line, a line of its
// log, its exit) and stopped by SIGTERM. What it serves and how (--tpm, --dbus,
// --allow-root, ...) is the test's: every argument but --socket.
#ifndef TPMSEC_TESTS_SUPPORT_SERVE_PROCESS_H_
#define TPMSEC_TESTS_SUPPORT_SERVE_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace tpmsec::testing {

class ServeProcess {
 public:
  explicit ServeProcess(std::string dir) : dir_(std::move(dir)) {}
  ~ServeProcess() { (void)stop(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // `PREFIX... tpmsec serve --socket SOCKET ARGS...` (PREFIX: a program it
  // runs under, setpriv), `env` added to its environment (and
  // TPMSEC_STATE_DIR=DIR/state unless `env` names one), its standard error
  // in the log (truncated); with `journal`, $JOURNAL_STREAM names the log's
  // device and inode as systemd names the journal's stream. A socket left
  // from an earlier start is removed first. False when it could not start.
  bool start(const std::vector<std::string>& args, std::vector<std::string> env = {}, bool journal = false,
             const std::vector<std::string>& prefix = {});
  // Until it wrote its start-up line ("tpmsec serve: serving ..."), which
  // follows its fronts' set-up: its socket listens (the socket's file is
  // there before: bound, not yet listening) and its bus name is taken.
  // False when serve ended first or 60 s passed.
  bool wait_serving();
  // Until its log holds `text` (true); false when serve ended without it or 60 s passed.
  bool wait_log(const std::string& text);
  // Until serve ended by itself (false: still running after 60 s).
  bool wait_exit();
  // Whether it still runs (its wait status is kept once it ended).
  bool alive();
  void signal(int sig);
  // SIGTERM; its wait status (of the earlier end if it had ended; -1 if it never ran).
  int stop();
  // Its exit code as a shell says it (128 + a signal), -1 while it runs or before.
  int exit_code() const;

  std::string socket() const { return dir_ + "/tpm.sock"; }
  std::string log_path() const { return dir_ + "/serve.log"; }
  std::string state() const { return dir_ + "/state"; }
  std::string log() const;
  pid_t pid() const { return pid_; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int status_ = -1;
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_SERVE_PROCESS_H_
