// Which connection gives way when a front end (a listener, or the clients
// handed over with add_client) is full, so that no uid can hold every
// connection and lock the others out: the idlest connection of the uid
// holding most on that front, when that uid holds at least two more than
// the newcomer's (a newcomer never takes from a uid holding as few as it
// will). Idle: nothing of a request read, no answer owed or unsent. A uid
// at its own limit (ServerOptions::max_clients_per_uid) is refused, never
// helped.
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_CONNECTION_SHARE_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_CONNECTION_SHARE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace tpmsec::server {

struct ConnectionView {
  std::optional<uint32_t> uid;  // none (TCP): one group
  bool idle = false;
  int64_t active_at = 0;  // when it last sent or was answered (steady ns)
};

// The index in `front` of the connection to close for a newcomer of `uid`;
// nullopt when none may be (the newcomer is refused).
std::optional<size_t> connection_to_close(const std::vector<ConnectionView>& front, const std::optional<uint32_t>& uid);

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_CONNECTION_SHARE_H_
