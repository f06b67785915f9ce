// The socket front end (tpmsec-server/socket_front/socket_front.h): a listening
// socket as a source of the server's loop.
#include "tpmsec-server/socket_front/socket_front.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "socket_front/listening_socket.h"

namespace tpmsec::socket_front {
namespace {

class ListeningSocket final : public server::PollSource {
 public:
  ListeningSocket(server::Server& server, Fd fd, std::shared_ptr<const server::Protocol> protocol, std::string name,
                  server::ClientLimits limits, bool unix_socket, std::string bound)
      : server_(server),
        fd_(std::move(fd)),
        protocol_(std::move(protocol)),
        name_(std::move(name)),
        limits_(limits),
        unix_(unix_socket),
        bound_(std::move(bound)) {}
  ~ListeningSocket() override {
    if (!bound_.empty()) ::unlink(bound_.c_str());
  }

  int fd() const override { return fd_.get(); }
  short events() const override { return POLLIN; }
  int timeout_ms() const override { return -1; }
  // One connection a turn, as the loop saw it ready: a flood of connects
  // waits in the backlog, not in the server.
  Status process() override {
    Fd fd = accept_client(fd_);
    if (!fd.valid()) return ok_status();
    server::ClientConnection c;
    c.peer = peer_identity(fd.get());
    c.socket = std::move(fd);
    c.protocol = protocol_;
    c.limits = limits_;
    c.front = name_;
    c.joins_process_space = unix_;
    (void)server_.connect(std::move(c));  // refused: closed, as a full backlog would
    return ok_status();
  }

 private:
  server::Server& server_;
  Fd fd_;
  std::shared_ptr<const server::Protocol> protocol_;
  std::string name_;
  server::ClientLimits limits_;
  bool unix_;
  std::string bound_;  // a socket file this front made: removed when it goes
};

Status add(server::Server& server, Result<Fd> fd, std::shared_ptr<const server::Protocol> protocol, std::string name,
           server::ClientLimits limits, bool unix_socket, std::string bound = "") {
  if (!fd.ok()) return fd.error();
  server.add_source(std::make_unique<ListeningSocket>(server, std::move(*fd), std::move(protocol), std::move(name),
                                                      limits, unix_socket, std::move(bound)));
  return ok_status();
}

}  // namespace

Status listen_unix(server::Server& server, const std::string& path, const UnixSocketOptions& socket,
                   server::ClientLimits limits) {
  return add(server, listen_unix_socket(path, socket), server::raw_tpm_protocol(), path, limits, true, path);
}

Status listen_fd(server::Server& server, UniqueFd fd, std::string name, server::ClientLimits limits) {
  int type = 0, listening = 0;
  socklen_t len = sizeof(type), len2 = sizeof(listening);
  if (!fd.valid() || ::getsockopt(fd.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len2) != 0 || !listening) {
    return usage_error(fmt::format("server: {} is not a listening stream socket", name));
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0 || ::fcntl(fd.get(), F_SETFD, FD_CLOEXEC) != 0) {
    return runtime_error(fmt::format("server: {}: {}", name, std::strerror(errno)));
  }
  return add(server, std::move(fd), server::raw_tpm_protocol(), std::move(name), limits, true);
}

Status listen_tcp(server::Server& server, const std::string& host, uint16_t port,
                  std::shared_ptr<const server::Protocol> protocol, std::string name, server::ClientLimits limits) {
  if (name.empty()) name = fmt::format("{}:{}", host, port);
  return add(server, listen_tcp_socket(host, port), std::move(protocol), std::move(name), limits, false);
}

}  // namespace tpmsec::socket_front
