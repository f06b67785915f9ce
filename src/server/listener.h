// The server's listening sockets and the connections it accepts from them:
// non-blocking, close-on-exec; TCP with TCP_NODELAY (a TPM command is one
// small frame); a Unix socket with the mode and group of /dev/tpmrm0.
#ifndef TPMSEC_SRC_SERVER_LISTENER_H_
#define TPMSEC_SRC_SERVER_LISTENER_H_

#include <string>

#include "server/fd.h"
#include "tpmsec/result.h"
#include "tpmsec/server/handle_space.h"
#include "tpmsec/server/server.h"

namespace tpmsec::server {

Result<Fd> listen_tcp_socket(const std::string& host, uint16_t port);
// Replaces a socket file at `path` (nothing else); kUsage for an unknown group.
Result<Fd> listen_unix_socket(const std::string& path, const UnixSocketOptions& options);
// An invalid Fd when nothing was waiting.
Fd accept_client(const Fd& listener);
// The uid and pid of a Unix socket's peer (SO_PEERCRED), neither for another socket.
PeerIdentity peer_identity(int fd);

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_SERVER_LISTENER_H_
