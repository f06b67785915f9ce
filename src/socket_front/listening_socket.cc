#include "socket_front/listening_socket.h"

#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace tpmsec::socket_front {

Result<Fd> listen_tcp_socket(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (gai != 0) return usage_error(fmt::format("server: cannot resolve {}: {}", host, gai_strerror(gai)));
  std::string last = "no address";
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) continue;
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 16) == 0) {
      freeaddrinfo(list);
      return fd;
    }
    last = std::strerror(errno);
  }
  freeaddrinfo(list);
  return runtime_error(fmt::format("server: cannot listen on {}:{}: {}", host, port, last));
}

Result<Fd> listen_unix_socket(const std::string& path, const UnixSocketOptions& options) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return usage_error(fmt::format("server: socket path '{}' is empty or too long", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  std::optional<gid_t> gid;
  if (!options.group.empty()) {
    std::vector<char> buf(4096);
    group g{};
    group* found = nullptr;
    if (getgrnam_r(options.group.c_str(), &g, buf.data(), buf.size(), &found) != 0 || !found) {
      return usage_error(fmt::format("server: no group '{}' for the socket", options.group));
    }
    gid = found->gr_gid;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return runtime_error(fmt::format("server: {} exists and is not a socket: not replaced", path));
    }
    ::unlink(path.c_str());
  }
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return runtime_error(fmt::format("server: socket: {}", std::strerror(errno)));
  // Created with no access for anyone, then given its mode: no window in
  // which another user could connect.
  const mode_t old = ::umask(0777);
  const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old);
  if (bound != 0) return runtime_error(fmt::format("server: cannot bind {}: {}", path, std::strerror(bind_errno)));
  if (gid && ::chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
    return runtime_error(
        fmt::format("server: cannot give {} to group {}: {}", path, options.group, std::strerror(errno)));
  }
  if (::chmod(path.c_str(), options.mode & 0777) != 0) {
    return runtime_error(fmt::format("server: cannot chmod {}: {}", path, std::strerror(errno)));
  }
  if (::listen(fd.get(), 64) != 0) return runtime_error(fmt::format("server: listen: {}", std::strerror(errno)));
  return fd;
}

Fd accept_client(const Fd& listener) {
  Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (fd.valid()) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // fails harmlessly on a Unix socket
  }
  return fd;
}

server::PeerIdentity peer_identity(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) return {};
  sockaddr_storage addr{};
  socklen_t alen = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0 || addr.ss_family != AF_UNIX) return {};
  server::PeerIdentity who{cred.uid, std::nullopt};
  if (cred.pid > 0) who.pid = static_cast<uint32_t>(cred.pid);
  return who;
}

}  // namespace tpmsec::socket_front
