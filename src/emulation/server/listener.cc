#include "emulation/server/listener.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tpmsec::emulation {

Result<io::Fd> listen_on(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (gai != 0) return usage_error(fmt::format("emulate: cannot resolve --host {}: {}", host, gai_strerror(gai)));
  std::string last = "no address";
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    io::Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
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
  return runtime_error(fmt::format("emulate: cannot listen on {}:{}: {}", host, port, last));
}

io::Fd accept_client(const io::Fd& listener) {
  io::Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (fd.valid()) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace tpmsec::emulation
