#include "support/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "testing/child_process.h"

namespace tpmsec::testing {

CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::string* input) {
  CommandResult result;
  int in = -1;
  if (input) {
    char name[] = "/tmp/tpmsec-test-stdin-XXXXXX";
    in = ::mkostemp(name, O_CLOEXEC);
    if (in < 0) return result;
    ::unlink(name);
    for (size_t off = 0; off < input->size();) {
      ssize_t n = ::write(in, input->data() + off, input->size() - off);
      if (n <= 0) {
        ::close(in);
        return result;
      }
      off += static_cast<size_t>(n);
    }
    ::lseek(in, 0, SEEK_SET);
  }
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return result;
  if (in < 0) in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  pid_t pid = spawn_with(argv, env, {in, out[1], err[1]});
  ::close(out[1]);
  ::close(err[1]);
  if (in >= 0) ::close(in);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    return result;
  }
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buf[4096];
  while (open_count > 0) {
    if (::poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP))) {
        ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          --open_count;
        } else {
          sinks[i]->append(buf, static_cast<size_t>(n));
        }
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

namespace {

// This test program's own state directory, removed when the program ends
// (by the program, never by a child it forked that exits normally).
const std::string& test_state_dir() {
  struct Dir {
    pid_t owner = ::getpid();
    std::string path = ::testing::TempDir() + "tpmsec-state-" + std::to_string(owner);
    ~Dir() {
      std::error_code ignored;
      if (::getpid() == owner) std::filesystem::remove_all(path, ignored);
    }
  };
  static const Dir dir;
  return dir.path;
}

}  // namespace

CommandResult run_tpmsec(const std::vector<std::string>& args, const std::vector<std::string>& env,
                         const std::string* input) {
  std::vector<std::string> argv{TPMSEC_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  // Never the machine's own state directory (/var/lib/tpmsec as root): each
  // test program keeps pins and kept null keys in a directory of its own.
  std::vector<std::string> full_env = env;
  bool has_state = false;
  for (const auto& e : env) has_state = has_state || e.rfind("TPMSEC_STATE_DIR=", 0) == 0;
  if (!has_state) full_env.push_back("TPMSEC_STATE_DIR=" + test_state_dir());
  // Never the machine's own TPM either: without --tpm the CLI would take
  // TPM2TOOLS_TCTI or /dev/tpmrm0 where the test machine has them. A test
  // of that choice names the variables itself (TPMSEC_TPM= unsets it).
  bool names_tpm = false;
  for (const auto& e : env) {
    names_tpm = names_tpm || e.rfind("TPMSEC_TPM=", 0) == 0 || e.rfind("TPM2TOOLS_TCTI=", 0) == 0;
  }
  if (!names_tpm) full_env.push_back("TPMSEC_TPM=embedded");
  return run_command(argv, full_env, input);
}

bool wait_until_it_catches(pid_t pid, int sig, int* status) {
  auto catches = [&] {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("SigCgt:", 0) == 0) return ((std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1) != 0;
    }
    return false;
  };
  for (int i = 0; i < 6000 && !catches(); ++i) {
    if (::waitpid(pid, status, WNOHANG) == pid) return false;
    ::usleep(10000);
  }
  return true;
}

std::string describe(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

}  // namespace tpmsec::testing
