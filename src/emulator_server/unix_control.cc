#include "emulator_server/unix_control.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace tpmsec::emulation {
namespace {

constexpr int kPollMs = 200;
constexpr size_t kMaxFdsPerMessage = 4;  // room to receive (and close) a few; more are discarded by the kernel

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Reads at most `want` bytes. The first descriptor that came with them goes
// to `fd` when it holds none; every other one is closed. -1 with errno set.
ssize_t receive(int sock, uint8_t* buf, size_t want, UniqueFd& fd, size_t& refused) {
  iovec iov{buf, want};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int raw = -1;
      std::memcpy(&raw, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      UniqueFd got(raw);
      if (!fd.valid()) {
        fd = std::move(got);
      } else {
        ++refused;  // closed here
      }
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) ++refused;
  return n;
}

}  // namespace

Result<std::unique_ptr<UnixControl>> UnixControl::bind(const std::string& path, int frame_timeout_ms, Log log) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return usage_error(fmt::format("emulate: --ctrl-unix path must be 1..{} bytes", sizeof(addr.sun_path) - 1));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return runtime_error(fmt::format("emulate: {} exists and is not a socket: not replaced", path));
    }
    ::unlink(path.c_str());
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return runtime_error(fmt::format("emulate: socket: {}", std::strerror(errno)));
  // Bound with no access for anyone, then made the owner's: no window in
  // which another user could connect.
  const mode_t old = ::umask(0777);
  const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old);
  if (bound != 0) return runtime_error(fmt::format("emulate: cannot bind {}: {}", path, std::strerror(bind_errno)));
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd.get(), 4) != 0) {
    const int e = errno;
    ::unlink(path.c_str());
    return runtime_error(fmt::format("emulate: {}: {}", path, std::strerror(e)));
  }
  return std::unique_ptr<UnixControl>(new UnixControl(path, std::move(fd), frame_timeout_ms, std::move(log)));
}

UnixControl::~UnixControl() {
  listener_.reset();
  ::unlink(path_.c_str());
}

void UnixControl::serve(const Stopped& stopped, const Channel& channel, const Serve& serve_request) {
  while (!stopped()) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) continue;
    log_("control channel: client connected");
    serve_connection(std::move(conn), stopped, channel, serve_request);
  }
}

void UnixControl::serve_connection(UniqueFd conn, const Stopped& stopped, const Channel& channel, const Serve& serve) {
  Bytes buffered;
  UniqueFd fd;
  size_t refused = 0;
  int64_t started_ms = 0;
  while (!stopped()) {
    const Parse parse = channel.parse(buffered);
    if (parse.kind == Parse::Kind::kRequest) {
      const Served served = serve(buffered, fd);
      if (fd.valid()) log_("control channel: a descriptor no CMD_SET_DATAFD took: closed");
      fd.reset();
      buffered.clear();
      if (!send_all(conn.get(), served.answer, stopped) || served.close) return;
      continue;
    }
    if (parse.kind == Parse::Kind::kRefuse) {
      if (!parse.why.empty()) log_(parse.why);
      (void)send_all(conn.get(), parse.answer, stopped);
      return;
    }
    pollfd p{conn.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, kPollMs);
    const bool stalled = !buffered.empty() && now_ms() - started_ms > timeout_ms_;
    if (ready <= 0 && !stalled) continue;
    Bytes chunk(parse.need);
    const ssize_t n = ready > 0 ? receive(conn.get(), chunk.data(), chunk.size(), fd, refused) : 0;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (refused != 0) {
      log_(fmt::format("control channel: {} descriptor(s) beyond the first refused and closed", refused));
      refused = 0;
    }
    if (n <= 0) {  // closed, failed or stalled mid-request
      if (!buffered.empty()) {
        const Parse cut = channel.truncated(buffered);
        if (!cut.why.empty()) log_(stalled ? fmt::format("{} (stalled {} ms)", cut.why, timeout_ms_) : cut.why);
        (void)send_all(conn.get(), cut.answer, stopped);
      }
      log_("control channel: client closed");
      return;
    }
    if (buffered.empty()) started_ms = now_ms();
    buffered.insert(buffered.end(), chunk.begin(), chunk.begin() + n);
  }
}

bool UnixControl::send_all(int fd, ByteView answer, const Stopped& stopped) {
  size_t sent = 0;
  const int64_t deadline = now_ms() + timeout_ms_;
  while (sent < answer.size()) {
    const ssize_t n = ::send(fd, answer.data() + sent, answer.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (stopped() || now_ms() > deadline) {
      log_("control channel: the client does not read its answer: dropped");
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    (void)::poll(&p, 1, kPollMs);
  }
  return true;
}

}  // namespace tpmsec::emulation
