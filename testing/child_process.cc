#include "testing/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tpmsec::testing {

pid_t spawn_with(const std::vector<std::string>& argv, const std::vector<std::string>& env, ChildStreams streams) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (streams.in >= 0) ::dup2(streams.in, 0);
    if (streams.out >= 0) ::dup2(streams.out, 1);
    if (streams.err >= 0) ::dup2(streams.err, 2);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, int* out_fd,
            const std::string& err_file) {
  int out[2] = {-1, -1};
  if (out_fd && ::pipe2(out, O_CLOEXEC) != 0) return -1;
  ChildStreams streams;
  streams.out = out[1];
  streams.err = err_file.empty() ? -1 : open_log(err_file);
  pid_t pid = spawn_with(argv, env, streams);
  if (streams.err >= 0) ::close(streams.err);
  if (out_fd) {
    ::close(out[1]);
    *out_fd = out[0];
    if (pid < 0) {
      ::close(out[0]);
      *out_fd = -1;
    }
  }
  return pid;
}

int open_log(const std::string& path) { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644); }

int stop_child(pid_t& pid) {
  if (pid <= 0) return -1;
  ::kill(pid, SIGCONT);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = -1;
  return status;
}

int exit_code_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

}  // namespace tpmsec::testing
