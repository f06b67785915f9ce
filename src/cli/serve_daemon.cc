#include "serve_daemon.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "tpmsec-server/resource_manager/log_priority.h"

namespace tpmsec::cli {
namespace {

bool g_error_priority = false;

// systemd.exec(5): $JOURNAL_STREAM is "DEVICE:INODE" of the stream the
// journal reads; stderr is the journal when it is that stream.
bool stderr_is_journal() {
  const char* env = std::getenv("JOURNAL_STREAM");
  if (!env || !*env) return false;
  struct stat st {};
  if (::fstat(2, &st) != 0) return false;
  return std::string(env) == fmt::format("{}:{}", static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
}

}  // namespace

std::string_view error_line_prefix() { return g_error_priority ? server::kLogErr : std::string_view(); }

ServiceNotifier::ServiceNotifier() {
  if (const char* s = std::getenv("NOTIFY_SOCKET"); s && (s[0] == '/' || s[0] == '@') && std::strlen(s) > 1) {
    address_ = s;
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  }
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  if (usec && (!pid || std::to_string(::getpid()) == pid)) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(usec, &end, 10);
    if (end && *end == '\0' && v > 0) watchdog_ = std::chrono::microseconds(v);
  }
}

ServiceNotifier::~ServiceNotifier() {
  if (fd_ >= 0) ::close(fd_);
}

void ServiceNotifier::notify(std::string_view state) {
  if (fd_ < 0) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (address_.size() >= sizeof(addr.sun_path)) return;
  std::memcpy(addr.sun_path, address_.data(), address_.size());
  if (address_[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size());
  (void)::sendto(fd_, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&addr), len);
}

void ServiceNotifier::tick() {
  if (!watchdog_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ping_ < *watchdog_ / 2) return;
  last_ping_ = now;
  notify("WATCHDOG=1");
}

bool ServiceNotifier::status_due() {
  if (fd_ < 0) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_status_ < kStatusEvery) return false;
  last_status_ = now;
  return true;
}

DaemonLog::DaemonLog() : journal_(stderr_is_journal()) { g_error_priority = journal_; }

void DaemonLog::server_line(const std::string& line) const {
  server::LogLine l = server::split_priority(line);
  const char prio[4] = {'<', static_cast<char>('0' + l.priority), '>', '\0'};
  this->line(prio, l.text);
}

void DaemonLog::line(std::string_view priority, std::string_view text) const {
  // One write per line (stderr is unbuffered): lines of the loop and of the
  // bus thread do not interleave.
  fmt::print(stderr, "{}tpmsec serve: {}\n", journal_ ? priority : std::string_view(), text);
}

}  // namespace tpmsec::cli
