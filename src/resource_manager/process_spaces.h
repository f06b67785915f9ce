// The handle spaces of the server's clients (tpmsec-server/resource_manager/server.h), and
// which connections share one. A connection of the socket front belongs to
// the space of its peer process (uid, pid and start time; server/
// peer_process.h): a program that connects once per command (go-tpm's
// OpenTPM, tpmutil's EmulatorReadWriteCloser) keeps its objects and
// sessions for as long as it lives, as it would on /dev/tpmrm0 with one
// descriptor held. Every other connection (TCP, handed over by the D-Bus
// front, a peer of which no pidfd could be had: nothing would tell its
// process from a later one of its pid) has a space of its own, ending with
// it.
//
// A space ends — its front and HandleSpace destroyed, so what it holds is
// flushed in the TPM — when its last connection closed and its process
// exited (seen on the pidfd the server's loop polls). A connection
// outliving its process (a child inherited it) keeps the space until it
// closes; a pid the kernel hands to another process meanwhile is another
// key (the start time), so that process gets a space of its own. A process that holds no connection
// keeps its space; a uid keeps at most `max_kept_per_uid` such spaces, its
// least recently active one ended beyond that (never another uid's).
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_PROCESS_SPACES_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_PROCESS_SPACES_H_

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "resource_manager/fd.h"
#include "resource_manager/peer_process.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec/transport.h"

namespace tpmsec::server {

struct SharedSpace {
  ClientId id = 0;                    // the space's client in the resource manager: its first connection's id
  std::optional<ProcessKey> process;  // the peer process whose connections join it; none: one connection's
  Fd exit;                            // readable once that process exited; invalid: ends with its last connection
  bool exited = false;
  size_t connections = 0;
  int64_t active_at = 0;  // when a connection of it last opened or closed (steady ns)
  // Declared so that the front goes first: it may flush what it holds
  // through the space, which closes the client in the manager.
  std::unique_ptr<HandleSpace> space;
  std::unique_ptr<Transport> front;  // ServerOptions::client_front's, above the space
};

class ProcessSpaces {
 public:
  ProcessSpaces(size_t max_kept_per_uid, std::function<void(const std::string&)> log)
      : max_kept_(max_kept_per_uid), log_(std::move(log)) {}

  // The live space of `process`, nullptr when it has none.
  SharedSpace* find(const ProcessKey& process);
  SharedSpace& add(std::unique_ptr<SharedSpace> space);
  // A connection of `space` closed: the space ends, stays or makes its uid
  // end its least recently active kept space (above).
  void leave(SharedSpace& space, int64_t now);
  // The pidfds to poll, appended to `fds`, and after the poll, the spaces
  // whose process exited (from index `first` of `fds`).
  void watch(std::vector<pollfd>& fds);
  void note_exits(const std::vector<pollfd>& fds, size_t first);
  size_t size() const { return spaces_.size(); }
  void clear() { spaces_.clear(); }

 private:
  void end(const SharedSpace& space, const char* why);
  void bound_kept(const SharedSpace& left);

  size_t max_kept_;
  std::function<void(const std::string&)> log_;
  std::vector<std::unique_ptr<SharedSpace>> spaces_;
  std::vector<SharedSpace*> watched_;  // the last watch()'s, in its order
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_PROCESS_SPACES_H_
