// The server: one thread owns one TPM and serves many clients, one command
// at a time in the order they completed (FIFO), each client in a handle
// space of its own (the resource manager, tpmsec-server/resource_manager/resource_manager.h). Front ends hand it their
// clients (connect(), the seam: tpmsec-server/resource_manager/client_connection.h) and their
// event sources (add_source(): a listening socket, the D-Bus connection),
// which its loop polls. A client is never waited for: its frame is bounded
// and it is dropped after frame_timeout_ms of stalling; what a closed
// client created is flushed. Memory is bounded (max_clients per front, one
// request and one answer per client); fairness between uids as
// docs/serve.md says. Errors as values; run() on one thread, connect() from
// any. What `tpmsec serve` and `tpmsec emulate` compose.
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_SERVER_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tpmsec-server/resource_manager/client.h"
#include "tpmsec-server/resource_manager/client_connection.h"
#include "tpmsec-server/resource_manager/poll_source.h"
#include "tpmsec/result.h"
#include "tpmsec/transport.h"

namespace tpmsec::server {

// The resource manager's (resource_manager.h, handle_space.h): named here,
// defined for the layers that compose the server (scripts/check-includes).
class HandleSpace;
class ResourceManager;

// How the server opens a pidfd of a peer process, the first way tried, then
// the next (src/resource_manager/peer_process.h): the kernel's own of the
// connection (SO_PEERPIDFD, Linux 6.5), pidfd_open(2) of its pid (Linux
// 5.3), none (a kernel before 5.3, or both refused: that process's
// connections then share no space).
enum class PidfdWay { kPeerPidfd, kPidfdOpen, kNone };

struct ServerOptions {
  bool isolate = true;  // per-client handle spaces; false: every client on the TPM's own handles
  // With isolate, a connection that joins_process_space (a Unix socket
  // front's) shares the handle space of its peer process (uid, pid and start
  // time), which lives until that process exited and its last connection
  // closed (a pidfd polled in the loop): a program that connects once per
  // command keeps its handles. Without a pidfd of the process (nothing then
  // tells it from a later process of its pid), false, or another front: a
  // space per connection, ending with it.
  bool spaces_follow_processes = true;
  PidfdWay pidfd_way = PidfdWay::kPeerPidfd;  // where the search for a pidfd starts (tests start lower)
  size_t max_clients = 32;                    // per front; beyond: an idle one closed for it (docs/serve.md) or refused
  size_t max_clients_per_uid = 16;            // open connections of one peer uid, every front together; beyond: refused
  UidLimits uid_limits;                       // what one uid may hold in the TPM (ResourceManager::set_uid_limits)
  // May be empty; each line begins with its priority (tpmsec-server/resource_manager/log_priority.h).
  std::function<void(const std::string&)> log;
  // Where the resource manager reads the TPM's command list (ResourceManager::start); nullptr: `tpm`.
  Transport* attributes_from = nullptr;
  // What a client's commands go through above its handle space (with
  // isolate): e.g. a Transport around a CommandWrapper that puts the
  // server's session on each client command, its own commands going to
  // space.server_view() (what they create is the server's) and the
  // client's wrapped frames to `space`. Called once per client, on the
  // loop's thread; destroyed before the space when the client closes. An
  // error closes the connection. Empty: the space itself.
  std::function<Result<std::unique_ptr<Transport>>(HandleSpace& space)> client_front;
  // Called on the loop's thread once per turn of run()'s loop (so at least
  // every kPollMs while no TPM command runs): a daemon's watchdog ping, a
  // reload a signal asked for. May be empty.
  std::function<void()> tick;
};

struct ServerStats {
  size_t clients = 0;         // open connections
  size_t spaces = 0;          // handle spaces: one per connection, or per peer process (spaces_follow_processes)
  uint64_t dropped = 0;       // connections dropped for stalling
  uint64_t commands = 0;      // client commands served
  size_t handle_entries = 0;  // ResourceManager::entries()
};

class Server {
 public:
  static constexpr int kPollMs = 200;

  // `tpm` (which must outlive the server) answers every client's commands.
  // With options.isolate, reads the TPM's command attributes first.
  static Result<std::unique_ptr<Server>> create(Transport& tpm, ServerOptions options);
  ~Server();  // closes every client, flushing what each created

  // One client (the seam: client_connection.h), the server's from here on,
  // whatever it answers. An error (not a connected stream socket; max_clients
  // waiting already): closed at once, on_closed not run. Else its id; when
  // the server closes it (or finds no room for it), on_closed runs on the
  // loop's thread. Thread-safe: the loop takes it before its next poll, in
  // the same turn when called from the loop's thread (a source's process()).
  Result<ClientId> connect(ClientConnection client);
  // An event source the loop polls (poll_source.h) until the server ends.
  // Call it while run() is not running, or from the loop's thread.
  void add_source(std::unique_ptr<PollSource> source);

  // Serves until *stop (checked every kPollMs), a protocol's stop_serving()
  // or a source's failure (that error). The clients stay connected.
  Status run(const std::atomic<bool>& stop);

  // Not thread-safe: call them while run() is not running (or from a
  // protocol, on its thread).
  ServerStats stats() const;
  ResourceManager& resources();

  class Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_SERVER_H_
