// The front-end seam: what a front end hands Server::connect() for one
// client. The server owns the connection from the call on, whatever it
// answers; when it closes (or refuses) it, on_closed runs on its loop's
// thread, so the front end frees what it keeps for the client.
//
// Today a client is a connected stream socket (`socket`): the Unix socket
// and TCP fronts' accepted connections (tpmsec-server/socket_front/socket_front.h),
// the D-Bus front's socket-pair end (tabrmd), the emulator's CMD_SET_DATAFD
// channel. A client without a descriptor (an in-process caller, CUSE's
// /dev/tpmrm0 read()/write()) is the seam's second kind, not built: a
// ClientChannel (bytes in, bytes out, a readiness the loop polls, e.g. an
// eventfd) in place of `socket`, behind the same connect(); the loop's
// Connection (src/resource_manager/connection.h) is the one place that reads and
// writes a client.
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_CLIENT_CONNECTION_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_CLIENT_CONNECTION_H_

#include <functional>
#include <memory>
#include <string>

#include "tpmsec-server/resource_manager/client.h"
#include "tpmsec-server/resource_manager/protocol.h"
#include "tpmsec/unique_fd.h"

namespace tpmsec::server {

struct ClientConnection {
  UniqueFd socket;                           // a connected stream socket
  std::shared_ptr<const Protocol> protocol;  // what it speaks; null: raw_tpm_protocol()
  PeerIdentity peer;                         // as the front learned it (SO_PEERCRED, the bus daemon)
  ClientLimits limits;
  // The front it came through, for the log and for ServerOptions::max_clients,
  // which applies per front ("/run/tpmsec.sock", "D-Bus").
  std::string front;
  // A Unix socket front's connection: it joins its peer process's handle
  // space (ServerOptions::spaces_follow_processes).
  bool joins_process_space = false;
  std::function<void()> on_closed;  // may be empty
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_CLIENT_CONNECTION_H_
