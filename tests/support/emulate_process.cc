#include "support/emulate_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "support/swtpm_process.h"
#include "support/test_data.h"

namespace tpmsec::testing {
namespace {

// The child: stdin and stdout /dev/null, stderr the log; dies with the test.
[[noreturn]] void exec_emulate(std::vector<std::string>& args, const std::string& err) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) ::_exit(127);
  int devnull = ::open("/dev/null", O_RDWR);
  int errfd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(devnull, 0);
  ::dup2(devnull, 1);
  ::dup2(errfd, 2);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

}  // namespace

EmulateServer::~EmulateServer() {
  stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

bool EmulateServer::start(const std::vector<std::string>& extra, std::string profile) {
  dir_ = make_temp_dir("tpmsec-emulate");
  if (dir_.empty()) return false;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = pick_port_pair();
    std::vector<std::string> args{TPMSEC_CLI_PATH, "emulate", profile, "--port", std::to_string(port_)};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) exec_emulate(args, dir_ + "/stderr");
    // Up to 30 s: a sanitizer build manufactures the TPM slowly.
    for (int i = 0; i < 3000; ++i) {
      if (can_connect(port_)) return true;
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop();
  }
  return false;
}

int EmulateServer::stop() {
  if (pid_ <= 0) return exit_code_;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 1000; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return exit_code_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return exit_code_ = -1;
}

bool EmulateServer::running() {
  int status;
  return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
}

bool EmulateServer::accepted(int client) const {
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(client, reinterpret_cast<sockaddr*>(&local), &len) != 0) return false;
  // The server's end: local address our peer's port, remote address ours.
  const std::string server_end = fmt::format("0100007F:{:04X}", port_);
  const std::string client_end = fmt::format("0100007F:{:04X}", ntohs(local.sin_port));
  std::ifstream tcp("/proc/net/tcp");
  std::string line, inode;
  while (inode.empty() && std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
    if (f.size() > 9 && f[1] == server_end && f[2] == client_end && f[9] != "0") inode = f[9];
  }
  if (inode.empty()) return false;
  const std::string wanted = "socket:[" + inode + "]";
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid_) + "/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::error_code gone;
    if (std::filesystem::read_symlink(it->path(), gone).string() == wanted) return true;
  }
  return false;
}

std::string EmulateServer::log() const { return slurp(dir_ + "/stderr"); }

std::string EmulateServer::spec() const {
  return fmt::format("swtpm:host=127.0.0.1,port={},ctrl={}", port_, port_ + 1);
}

std::string EmulateServer::tcti(const std::string& scheme) const {
  return fmt::format("{}:host=127.0.0.1,port={}", scheme, port_);
}

}  // namespace tpmsec::testing
