#include "tpmsec/transport/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "tpmsec/frame_header.h"

namespace tpmsec::io {

Result<Fd> connect_tcp(const std::string& host, uint16_t port, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  int gai = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (gai != 0) return runtime_error(fmt::format("cannot resolve {} host {}: {}", what, host, gai_strerror(gai)));
  std::string last_error = "no address";
  for (addrinfo* ai = list; ai; ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) {
      int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      freeaddrinfo(list);
      return fd;
    }
    last_error = std::strerror(errno);
  }
  freeaddrinfo(list);
  return runtime_error(fmt::format("cannot connect to {} at {}:{}: {}", what, host, port, last_error));
}

Result<Fd> connect_unix(const std::string& path, const std::string& what) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return usage_error(fmt::format("socket path too long: {}", path));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return runtime_error(fmt::format("cannot create socket: {}", std::strerror(errno)));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return runtime_error(fmt::format("cannot connect to {} at {}: {}", what, path, std::strerror(errno)));
  }
  return fd;
}

Status write_all(int fd, ByteView data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return runtime_error(fmt::format("cannot send to {}: {}", what, std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return ok_status();
}

Status read_exact(int fd, MutableByteView out, int timeout_ms, const std::string& what) {
  size_t done = 0;
  while (done < out.size()) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return runtime_error(fmt::format("cannot wait for {}: {}", what, std::strerror(errno)));
    }
    if (ready == 0) return runtime_error(fmt::format("{} did not answer within {} ms", what, timeout_ms));
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return runtime_error(fmt::format("cannot read from {}: {}", what, std::strerror(errno)));
    }
    if (n == 0) return runtime_error(fmt::format("{} closed the connection", what));
    done += static_cast<size_t>(n);
  }
  return ok_status();
}

Status set_receive_timeout(int fd, int timeout_ms, const std::string& what) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    return runtime_error(fmt::format("cannot set a receive timeout on {}: {}", what, std::strerror(errno)));
  }
  return ok_status();
}

Result<Bytes> read_frame(int fd, size_t max, const std::string& what) {
  constexpr size_t kFirstRead = 4096;  // most responses; a larger one grows to its size
  Bytes frame(std::min(max, kFirstRead));
  size_t done = 0;
  size_t want = kFrameHeaderBytes;
  while (done < want) {
    ssize_t n = ::recv(fd, frame.data() + done, frame.size() - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return runtime_error(fmt::format("{} did not answer in time", what));
      return runtime_error(fmt::format("cannot read from {}: {}", what, std::strerror(errno)));
    }
    if (n == 0) return runtime_error(fmt::format("{} closed the connection", what));
    done += static_cast<size_t>(n);
    if (done < kFrameHeaderBytes) continue;
    // The size from the codec's header reader; the tag is the reader of the
    // whole frame's to judge, as read_stream_frame leaves it.
    HeaderRead header = read_frame_header(ByteView(frame.data(), done), max);
    if (header.check == FrameCheck::kBadSize) {
      return parse_error(fmt::format("{} sent a response header with size {}", what, header.header.size));
    }
    want = header.header.size;
    if (done > want) {
      return parse_error(fmt::format("{} sent {} bytes after a {}-byte response", what, done - want, want));
    }
    if (frame.size() < want) frame.resize(want);
  }
  frame.resize(want);
  return frame;
}

}  // namespace tpmsec::io
