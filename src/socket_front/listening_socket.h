// The socket front's system calls: listening sockets and the connections
// accepted from them, non-blocking, close-on-exec; TCP with TCP_NODELAY (a
// TPM command is one small frame); a Unix socket with the mode and group of
// /dev/tpmrm0.
#ifndef TPMSEC_SRC_SOCKET_FRONT_LISTENING_SOCKET_H_
#define TPMSEC_SRC_SOCKET_FRONT_LISTENING_SOCKET_H_

#include <cstdint>
#include <string>

#include "tpmsec-server/socket_front/socket_front.h"
#include "tpmsec/result.h"
#include "tpmsec/unique_fd.h"

namespace tpmsec::socket_front {

using Fd = UniqueFd;

Result<Fd> listen_tcp_socket(const std::string& host, uint16_t port);
// Replaces a socket file at `path` (nothing else); kUsage for an unknown group.
Result<Fd> listen_unix_socket(const std::string& path, const UnixSocketOptions& options);
// An invalid Fd when nothing was waiting.
Fd accept_client(const Fd& listener);

}  // namespace tpmsec::socket_front

#endif  // TPMSEC_SRC_SOCKET_FRONT_LISTENING_SOCKET_H_
