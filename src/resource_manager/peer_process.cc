// The peer process of a Unix connection (server/peer_process.h).
#include "resource_manager/peer_process.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace tpmsec::server {
namespace {

#ifndef SO_PEERPIDFD
constexpr int SO_PEERPIDFD = 77;  // Linux 6.5 (asm-generic/socket.h)
#endif

// A pidfd of the connection's peer itself (Linux 6.5), else of whatever
// process has its pid now (pidfd_open, Linux 5.3): peer_process checks that
// the pid still names the process it read the start time of.
Fd open_pidfd(int fd, uint32_t pid, PidfdWay first, PeerProcess& out) {
  if (first == PidfdWay::kPeerPidfd) {
    int pidfd = -1;
    socklen_t len = sizeof(pidfd);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && len == sizeof(pidfd) && pidfd >= 0) {
      out.way = "SO_PEERPIDFD";
      return Fd(pidfd);
    }
  }
  if (first == PidfdWay::kNone) {
    out.why = "no pidfd asked for";
    return Fd();
  }
#ifdef SYS_pidfd_open
  const long opened = ::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0u);
  if (opened >= 0) {
    out.way = "pidfd_open";
    return Fd(static_cast<int>(opened));
  }
  out.why = fmt::format("pidfd_open: {}", std::strerror(errno));
#else
  out.why = "pidfd_open: not in this build's system headers";
#endif
  return Fd();
}

}  // namespace

std::optional<uint64_t> process_start_time(uint32_t pid) {
  if (pid == 0) return std::nullopt;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  // Field 2, the program's name, is in parentheses and may hold anything,
  // ")" and spaces among it: the fields are counted after the last ")".
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int n = 3; n <= 22; ++n) {
    if (!(rest >> field)) return std::nullopt;
  }
  uint64_t start = 0;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), start);
  if (ec != std::errc() || end != field.data() + field.size()) return std::nullopt;
  return start;
}

bool process_exited(const Fd& exit) {
  if (!exit.valid()) return true;
  pollfd p{exit.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

PeerProcess peer_process(int fd, const PeerIdentity& peer, PidfdWay first) {
  PeerProcess out;
  if (!peer.uid || !peer.pid) {
    out.why = "no peer process (not a Unix socket)";
    return out;
  }
  const std::optional<uint64_t> before = process_start_time(*peer.pid);
  if (!before) {
    out.why = fmt::format("pid {} is gone already", *peer.pid);
    return out;
  }
  out.exit = open_pidfd(fd, *peer.pid, first, out);
  if (out.exit.valid()) {
    // Alive after the second read: both reads and the pidfd are of the one
    // process that has held the pid throughout.
    const std::optional<uint64_t> after = process_start_time(*peer.pid);
    if (!after || *after != *before || process_exited(out.exit)) {
      out.why = fmt::format("pid {} ended as it connected", *peer.pid);
      out.exit = Fd();
      return out;
    }
  }
  out.key = ProcessKey{*peer.uid, *peer.pid, *before};
  return out;
}

}  // namespace tpmsec::server
