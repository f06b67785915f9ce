#include "support/exited_peer.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "support/fd_passing.h"

namespace tpmsec::testing {

int connect_from_exited_process(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    // System calls only, on what was made before the fork (the test
    // process may have other threads).
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(1);
    const char byte = 1;
    ::_exit(send_fd(pair[1], fd, &byte, 1) ? 0 : 1);
  }
  ::close(pair[1]);
  int fd = -1;
  if (child > 0) {
    char byte = 0;
    fd = receive_fd(pair[0], &byte, 1);
    // Whether the server saw the child alive or already gone, no other
    // connection comes from that process: the space is this connection's.
    ::waitpid(child, nullptr, 0);
  }
  ::close(pair[0]);
  return fd;
}

}  // namespace tpmsec::testing
