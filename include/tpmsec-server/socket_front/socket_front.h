// The socket front end: listening sockets whose connections it hands a
// Server (Server::connect(), tpmsec-server/resource_manager/client_connection.h), each a
// source of the server's loop (Server::add_source()), owned by the server.
//   - a Unix socket with /dev/tpmrm0's semantics (raw_tpm_protocol(): one
//     command written, one response read; mode 0660 and a group, `tss` in
//     production): its bound path (removed when the server ends), or one
//     systemd bound (socket activation, tpmsec.socket); a connection joins
//     its peer process's handle space (uid and pid from SO_PEERCRED);
//   - TCP with any protocol (tpmsec emulate's ports), TCP_NODELAY.
// One connection accepted per turn of the loop; never blocks. Errors as
// values; call these while the server's run() is not running.
#ifndef TPMSEC_SERVER_SOCKET_FRONT_SOCKET_FRONT_H_
#define TPMSEC_SERVER_SOCKET_FRONT_SOCKET_FRONT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "tpmsec-server/resource_manager/client_connection.h"
#include "tpmsec-server/resource_manager/server.h"
#include "tpmsec/result.h"
#include "tpmsec/unique_fd.h"

namespace tpmsec::socket_front {

struct UnixSocketOptions {
  unsigned mode = 0660;
  std::string group;  // empty: the process's group; "tss" for /dev/tpmrm0's
};

// A Unix stream socket at `path` (an existing socket file there is
// replaced, anything else refused).
Status listen_unix(server::Server& server, const std::string& path, const UnixSocketOptions& socket = {},
                   server::ClientLimits limits = {});
// A listening Unix stream socket someone else bound (systemd's): taken over;
// the socket file is its owner's.
Status listen_fd(server::Server& server, UniqueFd fd, std::string name, server::ClientLimits limits = {});
// host:port; `name` is how the log calls it ("host:port" when empty).
Status listen_tcp(server::Server& server, const std::string& host, uint16_t port,
                  std::shared_ptr<const server::Protocol> protocol, std::string name = "",
                  server::ClientLimits limits = {});

// Who a Unix socket's peer is (SO_PEERCRED: uid and pid); none for another
// socket.
server::PeerIdentity peer_identity(int fd);

}  // namespace tpmsec::socket_front

#endif  // TPMSEC_SERVER_SOCKET_FRONT_SOCKET_FRONT_H_
