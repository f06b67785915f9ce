// Who a client is and what it may hold: the types a front end fills in for
// the server (ClientConnection, tpmsec-server/resource_manager/client_connection.h) and the
// resource manager keeps per client and per uid (resource_manager.h).
// Values only; describe_peer() reads /proc for the log.
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_CLIENT_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "tpmsec/constants.h"

namespace tpmsec::server {

using ClientId = uint64_t;

// What one client may hold and send.
struct ClientLimits {
  size_t max_frame_bytes = kMaxCommandBytes;  // a larger command frame is refused and the connection closed
  int frame_timeout_ms = 5'000;               // a started frame, or an answer not read, may stall this long
  size_t max_objects = 16;                    // transient objects held at once (tpm2-abrmd: 27)
  size_t max_sessions = 8;                    // sessions held at once, loaded or saved (tpm2-abrmd: 4)
};

// What one peer uid may hold at once, all its clients together (clients
// without a uid are one group). Sessions count live, saved and abandoned.
struct UidLimits {
  size_t max_sessions = 32;   // TPM_RC_SESSION_HANDLES beyond
  size_t max_objects = 64;    // transient objects, loaded or saved: TPM_RC_OBJECT_MEMORY beyond
  size_t max_abandoned = 16;  // sessions kept after their client closed: the uid's oldest flushed beyond
};

// Who a client is, as the front end learned it (SO_PEERCRED for a Unix
// socket; D-Bus's credentials for a connection it hands over). A session a
// client saved survives its close only for a later client of the same uid;
// clients without one (TCP) form one group of their own. The pid is only
// informative (the log names the program): it may be reused once the client
// is gone.
struct PeerIdentity {
  std::optional<uint32_t> uid;
  std::optional<uint32_t> pid;
};

// "client 3, uid 1000, pid 4242 (tpm2_pcrextend)" for the log: what is
// known of the peer, its program's name read from /proc/PID/comm now (so
// call it while the peer is connected), non-printable bytes as '?'.
std::string describe_peer(ClientId client, const PeerIdentity& peer);
// The program name of process `pid` (/proc/PID/comm, printable ASCII only),
// empty when it cannot be read.
std::string program_of(uint32_t pid);

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_CLIENT_H_
