// The process at the other end of a Unix connection, which a handle space
// follows on the socket front (docs/serve.md, "A handle space per
// process"): who it is — uid, pid and the process's start time, so that a
// pid the kernel hands to a later process never names the same space — and
// a descriptor that turns readable when it exits (a pidfd).
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_PEER_PROCESS_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_PEER_PROCESS_H_

#include <compare>
#include <cstdint>
#include <optional>
#include <string>

#include "resource_manager/fd.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec-server/resource_manager/server.h"

namespace tpmsec::server {

struct ProcessKey {
  uint32_t uid = 0;
  uint32_t pid = 0;
  uint64_t start = 0;  // clock ticks after boot: /proc/PID/stat, field 22 (proc(5))
  auto operator<=>(const ProcessKey&) const = default;
};

struct PeerProcess {
  std::optional<ProcessKey> key;  // none: no uid and pid, or the process is gone already
  Fd exit;                        // readable once the process exited; invalid: no pidfd (why says why)
  std::string why;
  const char* way = "";  // what gave the pidfd: "SO_PEERPIDFD", "pidfd_open"
};

// The start time of process `pid`, none when it is gone or unreadable.
std::optional<uint64_t> process_start_time(uint32_t pid);
// The peer of connection `fd` (whose SO_PEERCRED `peer` holds), read right
// after accept: its start time, and a pidfd of it (SO_PEERPIDFD where the
// kernel has it, Linux 6.5, else pidfd_open(2), Linux 5.3; `first` says
// where to start). The start time is read again once the pidfd is open and
// the process seen alive, so the pidfd and the key are of one process.
PeerProcess peer_process(int fd, const PeerIdentity& peer, PidfdWay first = PidfdWay::kPeerPidfd);
// Whether the process behind a pidfd exited (or the pidfd is unusable).
bool process_exited(const Fd& exit);

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_PEER_PROCESS_H_
