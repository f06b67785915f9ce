#include "support/serve_process.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/child_process.h"

namespace tpmsec::testing {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPatience = std::chrono::seconds(60);  // a bound on waiting, never a pace

// Polls `done` every 20 ms until it holds or the patience ran out.
template <class Done>
bool poll_until(Done done) {
  for (auto end = Clock::now() + kPatience; Clock::now() < end;) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

}  // namespace

bool ServeProcess::start(const std::vector<std::string>& args, std::vector<std::string> env, bool journal,
                         const std::vector<std::string>& prefix) {
  ::unlink(socket().c_str());
  std::vector<std::string> argv = prefix;
  argv.insert(argv.end(), {TPMSEC_CLI_PATH, "serve", "--socket", socket()});
  argv.insert(argv.end(), args.begin(), args.end());
  bool has_state = false;
  for (const auto& e : env) has_state = has_state || e.rfind("TPMSEC_STATE_DIR=", 0) == 0;
  if (!has_state) env.push_back("TPMSEC_STATE_DIR=" + state());
  const int log = open_log(log_path());
  if (log < 0) return false;
  struct stat st {};
  ::fstat(log, &st);
  if (journal) env.push_back(fmt::format("JOURNAL_STREAM={}:{}", st.st_dev, st.st_ino));
  status_ = -1;
  pid_ = spawn_with(argv, env, {-1, -1, log});
  ::close(log);
  return pid_ > 0;
}

bool ServeProcess::wait_serving() { return wait_log("tpmsec serve: serving "); }

bool ServeProcess::wait_log(const std::string& text) {
  return poll_until([&] { return log().find(text) != std::string::npos || !alive(); }) &&
         log().find(text) != std::string::npos;
}

bool ServeProcess::wait_exit() {
  return poll_until([this] { return !alive(); });
}

bool ServeProcess::alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    status_ = status;
    pid_ = -1;
    return false;
  }
  return true;
}

void ServeProcess::signal(int sig) {
  if (pid_ > 0) ::kill(pid_, sig);
}

int ServeProcess::stop() {
  if (pid_ > 0) status_ = stop_child(pid_);
  return status_;
}

int ServeProcess::exit_code() const { return pid_ > 0 || status_ == -1 ? -1 : exit_code_of(status_); }

std::string ServeProcess::log() const {
  std::ifstream in(log_path());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tpmsec::testing
