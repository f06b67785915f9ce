// The server: one thread owns one TPM and serves many clients, each
// connection a client (include/tpmsec/server/protocol.h says what a
// connection speaks), each with a handle space of its own
// (include/tpmsec/server/handle_space.h). What `tpmsec serve` and `tpmsec
// emulate` compose.
//
//   - listeners: a Unix socket with /dev/tpmrm0 semantics (listen_unix: one
//     command written, one response read; mode 0660, a group of the
//     caller's choice, `tss` in production, as udev gives /dev/tpmrm0), TCP
//     with any protocol (listen_tcp), or a connected stream socket handed
//     over (add_client: the D-Bus front end's socketpair end).
//   - scheduling: one command at a time on the TPM, served in the order the
//     loop saw the whole commands complete, across clients (FIFO; commands
//     that complete while the TPM is busy are seen together, in connection
//     order); a client has at most one command queued (it reads its answer
//     before it sends the next, as on /dev/tpmrm0).
//   - a client is never waited for: its frame is bounded (max_frame_bytes,
//     checked from the header before the body is read), and a client that
//     stops in the middle of a frame or does not read its answer for
//     frame_timeout_ms is dropped. A closed, dropped or crashed client's
//     handles are flushed at once; on a Unix socket front (with
//     spaces_follow_processes), once its process exited too.
//   - stop: run() returns within kPollMs of *stop turning true (SIGTERM);
//     the clients stay connected (run() may be called again) until the
//     Server is destroyed, which closes every client (flushing what each
//     created) and flushes every session the server tracks.
// Bounded memory: at most max_clients connections per listener (and for
// add_client), each with one request and one answer buffered.
// Fair: a peer uid has at most max_clients_per_uid connections, every front
// together; when a front is full, a newcomer gets in by the idlest (idle:
// nothing owed either way) connection of the uid holding most there being
// closed, when that uid holds at least two more than the newcomer's
// (src/server/connection_share.h); what one uid holds in the TPM is bounded
// by uid_limits and the session handles' fair shares (handle_space.h).
#ifndef TPMSEC_SERVER_SERVER_H_
#define TPMSEC_SERVER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tpmsec/result.h"
#include "tpmsec/server/handle_space.h"
#include "tpmsec/server/protocol.h"
#include "tpmsec/transport.h"

namespace tpmsec::server {

// How the socket front opens a pidfd of a peer process, the first way
// tried, then the next (src/server/peer_process.h): the kernel's own of the
// connection (SO_PEERPIDFD, Linux 6.5), pidfd_open(2) of its pid (Linux
// 5.3), none (a kernel before 5.3, or both refused: that process's
// connections then share no space).
enum class PidfdWay { kPeerPidfd, kPidfdOpen, kNone };

struct ServerOptions {
  bool isolate = true;  // per-client handle spaces; false: every client on the TPM's own handles
  // With isolate, a connection of a Unix socket front (listen_unix,
  // listen_fd) joins the handle space of its peer process (uid, pid and
  // start time from SO_PEERCRED and /proc), which lives until that process
  // exited and its last connection closed (a pidfd polled in the loop): a
  // program that connects once per command keeps its handles. Without a
  // pidfd of the process (nothing then tells it from a later process of
  // its pid), false, or another front: a space per connection, ending with
  // it.
  bool spaces_follow_processes = true;
  PidfdWay pidfd_way = PidfdWay::kPeerPidfd;  // where the search for a pidfd starts (tests start lower)
  size_t max_clients = 32;          // per listener, and for add_client; beyond: room made (above) or closed at once
  size_t max_clients_per_uid = 16;  // open connections of one peer uid (Unix sockets, add_client); beyond: closed
  ClientLimits limits;              // for the clients the listeners accept
  UidLimits uid_limits;             // what one uid may hold in the TPM (ResourceManager::set_uid_limits)
  // May be empty; each line begins with its priority (tpmsec/server/log_priority.h).
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
  // Called on the loop's thread after a client's connection closed (for
  // whatever reason) and its space was closed, or a handed-over one was
  // refused: the front end that handed it over (add_client) frees what it
  // holds for it. May be empty.
  std::function<void(ClientId)> on_closed;
  // Called on the loop's thread once per turn of run()'s loop (so at least
  // every kPollMs while no TPM command runs): a daemon's watchdog ping, a
  // reload a signal asked for. May be empty.
  std::function<void()> tick;
};

struct UnixSocketOptions {
  unsigned mode = 0660;
  std::string group;  // empty: the process's group; "tss" for /dev/tpmrm0's
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

  // A Unix stream socket at `path` (an existing socket file there is
  // replaced; removed when the server ends), speaking raw_tpm_protocol().
  // Returns nothing until run().
  Status listen_unix(const std::string& path, const UnixSocketOptions& socket = {});
  // A TCP socket on host:port speaking `protocol`. Non-blocking accepts,
  // TCP_NODELAY (a TPM command is one small frame). `name` is how the log
  // calls it ("host:port" when empty).
  Status listen_tcp(const std::string& host, uint16_t port, std::shared_ptr<const Protocol> protocol,
                    std::string name = "");
  // A listening Unix stream socket someone else bound (systemd's socket
  // activation, tpmsec.socket): taken over (closed when the server ends),
  // speaking raw_tpm_protocol(); the socket file is its owner's.
  Status listen_fd(int fd, std::string name);

  // Takes ownership of an already connected stream socket `fd` (closed on
  // failure too): a client speaking raw_tpm_protocol() with `limits`; its
  // peer identity from SO_PEERCRED unless `peer` names one. Thread-safe:
  // another thread may call it while run() serves (run() picks it up within
  // kPollMs, at once when woken through the internal pipe).
  Result<ClientId> add_client(int fd, ClientLimits limits, PeerIdentity peer = {});

  // Serves until *stop (checked every kPollMs) or a protocol's stop_serving().
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

#endif  // TPMSEC_SERVER_SERVER_H_
