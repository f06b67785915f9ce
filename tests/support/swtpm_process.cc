#include "support/swtpm_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

namespace tpmsec::testing {
namespace {

bool port_free(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

// A port P such that P and P+1 are both free now.
uint16_t pick_port_pair() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    uint16_t p = ntohs(a.sin_port);
    if (p < 65000 && port_free(p) && port_free(p + 1)) return p;
  }
  return 0;
}

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool can_connect(uint16_t port) {
  int fd = connect_loopback(port);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

bool have_program(const std::string& program) {
  std::string cmd = "command -v " + program + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

bool SwtpmProcess::start() {
  if (!have_program("swtpm")) {
    error_ = "swtpm is not installed (apt-get install swtpm)";
    return false;
  }
  std::string dir = preset_state_dir_;
  if (dir.empty()) {
    char tmpl[] = "/tmp/tpmsec-swtpm-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      error_ = "mkdtemp failed";
      return false;
    }
    state_dir_ = dir = tmpl;
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = pick_port_pair();
    ctrl_port_ = port_ + 1;
    std::string server = "type=tcp,port=" + std::to_string(port_) + ",bindaddr=127.0.0.1";
    std::string ctrl = "type=tcp,port=" + std::to_string(ctrl_port_) + ",bindaddr=127.0.0.1";
    std::string state = "dir=" + dir;
    pid_ = ::fork();
    if (pid_ == 0) {
      // swtpm dies with the test: a test that crashes (a sanitizer abort)
      // must not leave it running, holding the test's output pipe open so
      // that ctest waits for it until its timeout.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() == 1) ::_exit(127);  // the test already died
      int devnull = ::open("/dev/null", O_RDWR);
      if (devnull >= 0) {
        ::dup2(devnull, 0);
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
      }
      std::vector<const char*> argv{"swtpm",
                                    "socket",
                                    "--tpm2",
                                    "--server",
                                    server.c_str(),
                                    "--ctrl",
                                    ctrl.c_str(),
                                    "--tpmstate",
                                    state.c_str(),
                                    "--flags",
                                    "not-need-init,startup-clear",
                                    nullptr};
      ::execvp("swtpm", const_cast<char* const*>(argv.data()));
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      if (can_connect(port_)) return true;
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) break;  // exited: port taken, try another
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill_process();
  }
  error_ = "swtpm did not start";
  return false;
}

void SwtpmProcess::stop() {
  kill_process();
  if (!state_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
    state_dir_.clear();
  }
}

void SwtpmProcess::kill_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }
}

std::string SwtpmProcess::spec() const {
  return "swtpm:host=127.0.0.1,port=" + std::to_string(port_) + ",ctrl=" + std::to_string(ctrl_port_);
}

std::string SwtpmProcess::tcti() const { return "swtpm:host=127.0.0.1,port=" + std::to_string(port_); }

}  // namespace tpmsec::testing
