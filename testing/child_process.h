// Child processes for the tests and the soak (bench/soak): a program started
// with fork and exec, its standard streams where the caller says, stopped by
// SIGTERM (library tpmsec_test_processes, never installed).
#ifndef TPMSEC_TESTING_CHILD_PROCESS_H_
#define TPMSEC_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace tpmsec::testing {

// The child's standard input, output and error: a descriptor it gets as
// that stream (the caller keeps and closes its own copy), or -1 to leave the
// stream as it inherits it.
struct ChildStreams {
  int in = -1;
  int out = -1;
  int err = -1;
};

// Starts argv (argv[0] searched on PATH) with `env` entries ("K=V") added to
// its environment and `streams` as its streams; no shell is involved. Its
// pid; -1 when it cannot fork.
pid_t spawn_with(const std::vector<std::string>& argv, const std::vector<std::string>& env, ChildStreams streams);

// The same with its standard output readable from *out_fd (a pipe, if
// out_fd is given) and its standard error written to the file `err_file`
// (created or truncated, if given).
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int* out_fd = nullptr,
            const std::string& err_file = {});

// `path` opened for writing, created (0644) or truncated, close-on-exec: a
// child's log. -1 when it cannot be.
int open_log(const std::string& path);

// SIGTERM (after SIGCONT, should it be stopped) to `pid`, then its wait
// status; `pid` is -1 afterwards. -1 when no child runs (pid <= 0).
int stop_child(pid_t& pid);

// A wait status as a shell says it: the exit code, or 128 + the signal.
int exit_code_of(int wait_status);

// A process started in the background, stopped by SIGTERM.
struct Child {
  pid_t pid = -1;
  // SIGTERM, then its wait status (-1 when none runs).
  int stop() { return stop_child(pid); }
  ~Child() { stop(); }
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTING_CHILD_PROCESS_H_
