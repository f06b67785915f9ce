// The server's loop (tpmsec-server/resource_manager/server.h): one thread polls the front
// ends' sources, a wake-up pipe (connect() from another thread) and every
// client; a client's request is read as far as its protocol asks, a whole
// one joins the queue, and the queue is served in order, one command at a
// time on the one TPM.
#include "tpmsec-server/resource_manager/server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "resource_manager/connection.h"
#include "resource_manager/connection_share.h"
#include "resource_manager/peer_process.h"
#include "resource_manager/process_spaces.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec-server/resource_manager/log_priority.h"
#include "tpmsec-server/resource_manager/resource_manager.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"

namespace tpmsec::server {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

class Server::Impl {
 public:
  Impl(Transport& tpm, ServerOptions options)
      : tpm_(tpm), o_(std::move(options)), rm_(tpm, o_.log), spaces_(o_.max_clients_per_uid, o_.log) {}

  Status start() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return runtime_error("server: pipe failed");
    wake_r_ = Fd(p[0]);
    wake_w_ = Fd(p[1]);
    rm_.set_uid_limits(o_.uid_limits);
    if (o_.isolate) TPMSEC_RETURN_IF_ERROR(rm_.start(o_.attributes_from));
    return ok_status();
  }

  Result<ClientId> connect(ClientConnection client) {
    int type = 0;
    socklen_t len = sizeof(type);
    const int fd = client.socket.get();
    if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
      return usage_error("server: a client is a connected stream socket");
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 || ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      return runtime_error(fmt::format("server: a client's socket: {}", std::strerror(errno)));
    }
    if (!client.protocol) client.protocol = raw_tpm_protocol();
    std::lock_guard<std::mutex> lock(mu_);
    // The front's limit is the loop's to apply (it may close an idle
    // connection for this one); this bounds what waits for it.
    if (pending_.size() >= o_.max_clients) {
      return runtime_error(fmt::format("server: {} clients wait to be taken already: refused", pending_.size()));
    }
    const ClientId id = ++last_id_;
    pending_.push_back(Pending{id, std::move(client)});
    has_pending_.store(true, std::memory_order_release);
    if (std::this_thread::get_id() != loop_thread_) {
      const char byte = 1;
      (void)!::write(wake_w_.get(), &byte, 1);
    }
    return id;
  }

  void add_source(std::unique_ptr<PollSource> source) { sources_.push_back(std::move(source)); }

  Status run(const std::atomic<bool>& stop) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      loop_thread_ = std::this_thread::get_id();
    }
    Status ran = serve(stop);
    {
      std::lock_guard<std::mutex> lock(mu_);
      loop_thread_ = {};
    }
    // The last answers (a control channel's shutdown) go out before the sockets close.
    for (const auto& c : clients_) (void)c->conn.flush();
    return ran;
  }

  Status serve(const std::atomic<bool>& stop) {
    while (!stop.load() && !shutdown_) {
      if (o_.tick) o_.tick();
      adopt_pending();
      std::erase_if(clients_, [](const auto& c) { return c->closed; });  // some may have made room
      // Reused turn after turn: the loop allocates nothing to wait.
      std::vector<pollfd>& fds = fds_;
      fds.assign(1, pollfd{wake_r_.get(), POLLIN, 0});
      for (const auto& src : sources_) fds.push_back({src->fd(), src->events(), 0});
      const size_t first_client = fds.size();
      for (const auto& c : clients_) {
        short events = c->conn.sending() ? POLLOUT : (c->queued ? 0 : POLLIN);
        fds.push_back({c->conn.fd(), events, 0});
      }
      const size_t first_process = fds.size();
      spaces_.watch(fds);
      int ready = ::poll(fds.data(), fds.size(), queue_.empty() && !read_ahead() ? poll_timeout_ms() : 0);
      if (ready < 0 && errno != EINTR)
        return runtime_error(fmt::format("server: poll failed: {}", std::strerror(errno)));
      if (ready > 0 && fds[0].revents) drain_wake();
      if (ready > 0) spaces_.note_exits(fds, first_process);
      const int64_t now = now_ns();
      // Open clients first, in the order they came: a close a client sent
      // before another connected is handled before that one's commands.
      const size_t open = clients_.size();
      for (size_t i = 0; i < open && !shutdown_; ++i) {
        Client& c = *clients_[i];
        const short revents = ready > 0 ? fds[first_client + i].revents : 0;
        if (revents & POLLOUT) {
          if (!c.conn.flush()) drop(c);
        } else if (((revents & (POLLIN | POLLHUP | POLLERR)) || c.conn.buffered()) && !c.queued) {
          read_request(c, now);
        }
        if (!c.closed && !c.queued && c.conn.deadline() && *c.conn.deadline() <= now) stalled(c);
        if (!c.closed && c.conn.closing() && !c.conn.sending()) drop(c);
      }
      serve_queue();
      std::erase_if(clients_, [](const auto& c) { return c->closed; });
      // The front ends' sources between two TPM commands; what they hand
      // over (connect()) is taken in this turn.
      for (size_t i = 0; i < sources_.size() && !shutdown_; ++i) {
        if ((ready > 0 && fds[1 + i].revents) || sources_[i]->timeout_ms() == 0) {
          TPMSEC_RETURN_IF_ERROR(sources_[i]->process());
        }
      }
      adopt_pending();
      std::erase_if(clients_, [](const auto& c) { return c->closed; });
    }
    return ok_status();
  }

  void close_all() {
    for (const auto& c : clients_) drop(*c);
    clients_.clear();
    spaces_.clear();  // the processes that hold no connection: what they hold is flushed
    queue_.clear();
    std::vector<Pending> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      left.swap(pending_);
      has_pending_.store(false, std::memory_order_relaxed);
    }
    for (Pending& p : left) {
      if (p.client.on_closed) p.client.on_closed();
    }
  }

  ServerStats stats() const {
    ServerStats s;
    s.clients = clients_.size();
    s.dropped = dropped_;
    s.commands = commands_;
    s.spaces = spaces_.size();
    s.handle_entries = rm_.entries();
    return s;
  }

  ResourceManager& resources() { return rm_; }
  void shut() { rm_.shutdown(); }

 private:
  struct Client {
    Client(ClientId i, ClientConnection&& from)
        : id(i),
          conn(std::move(from.socket)),
          protocol(std::move(from.protocol)),
          front(std::move(from.front)),
          limits(from.limits),
          uid(from.peer.uid),
          on_closed(std::move(from.on_closed)) {}
    ClientId id;
    Connection conn;
    std::shared_ptr<const Protocol> protocol;
    std::string front;  // the front it came through (ClientConnection::front)
    ClientLimits limits;
    std::optional<uint32_t> uid;
    std::function<void()> on_closed;
    SharedSpace* shared = nullptr;  // its handle space (spaces_'s), with isolate; maybe another connection's too
    bool queued = false;
    bool closed = false;
    int64_t active_at = 0;  // when it last sent or was answered
  };
  struct Pending {
    ClientId id;
    ClientConnection client;
  };

  // What a protocol may do for one client.
  class Port final : public ClientPort {
   public:
    Port(Impl& s, Client& c) : s_(s), c_(c) {}
    Bytes execute(ByteView command) override {
      ++s_.commands_;
      SharedSpace* sp = c_.shared;
      Transport& to = !sp ? s_.tpm_ : sp->front ? *sp->front : static_cast<Transport&>(*sp->space);
      auto r = to.transmit(command);
      return r.ok() ? std::move(*r) : error_frame(rc::kFailure);
    }
    void stop_serving() override { s_.shutdown_ = true; }
    void log(const std::string& line) override { s_.log(line); }

   private:
    Impl& s_;
    Client& c_;
  };

  void log(const std::string& line) const {
    if (o_.log) o_.log(line);
  }

  int poll_timeout_ms() const {
    int64_t wait = int64_t{kPollMs} * 1'000'000;
    const int64_t now = now_ns();
    for (const auto& c : clients_) {
      if (c->conn.deadline()) wait = std::min(wait, std::max<int64_t>(*c->conn.deadline() - now, 0));
    }
    for (const auto& src : sources_) {
      if (const int ms = src->timeout_ms(); ms >= 0) wait = std::min(wait, int64_t{ms} * 1'000'000);
    }
    return static_cast<int>((wait + 999'999) / 1'000'000);
  }

  // A client has sent more than its last request already: the loop reads it without waiting.
  bool read_ahead() const {
    return std::any_of(clients_.begin(), clients_.end(),
                       [](const auto& c) { return !c->queued && !c->closed && c->conn.buffered(); });
  }

  void drain_wake() {
    char buf[64];
    while (::read(wake_r_.get(), buf, sizeof(buf)) > 0) {
    }
  }

  void adopt_pending() {
    // Twice a turn, nearly always with nothing to take: no lock then. A
    // connect() that stores after this load is taken next turn (its wake-up
    // byte ends the poll).
    if (!has_pending_.load(std::memory_order_acquire)) return;
    std::vector<Pending> taken;
    {
      std::lock_guard<std::mutex> lock(mu_);
      taken.swap(pending_);
      has_pending_.store(false, std::memory_order_relaxed);
    }
    for (Pending& p : taken) {
      if (!has_room(p.client.front, p.client.peer) || !open_client(p.id, std::move(p.client))) {
        // Refused: its front frees what it holds for it, as for a closed one.
        if (p.client.on_closed) p.client.on_closed();
      }
    }
  }

  // False (and the connection closed) when its front could not be made.
  bool open_client(ClientId id, ClientConnection&& from) {
    const bool spaced = o_.isolate && from.protocol->carries_commands();
    const bool per_process = from.joins_process_space && o_.spaces_follow_processes;
    const PeerIdentity peer = from.peer;
    auto c = std::make_unique<Client>(id, std::move(from));
    if (spaced) {
      c->shared = space_for(id, c->conn.fd(), per_process, c->limits, peer);
      if (!c->shared) {
        from.on_closed = std::move(c->on_closed);  // the caller runs it
        return false;
      }
      ++c->shared->connections;
    }
    c->active_at = now_ns();
    clients_.push_back(std::move(c));
    return true;
  }

  // The handle space of connection `id`: its peer process's when it has
  // one already (`per_process`), else a new one, with its front; nullptr
  // when the front could not be made.
  SharedSpace* space_for(ClientId id, int fd, bool per_process, ClientLimits limits, const PeerIdentity& peer) {
    auto made = std::make_unique<SharedSpace>();
    made->id = id;
    if (per_process) {
      PeerProcess process = peer_process(fd, peer, o_.pidfd_way);
      if (process.key && !process.exit.valid()) {
        // Nothing would tell this process from a later one of its pid (and
        // start time) once it exited: its connections share no space.
        log(fmt::format("{}{}: no pidfd ({}): a handle space of this connection's own", kLogDebug,
                        describe_peer(id, peer), process.why));
      } else if (process.key) {
        if (SharedSpace* joined = spaces_.find(*process.key)) {
          log(fmt::format("{}{}: joins the handle space of client {} (the same process)", kLogDebug,
                          describe_peer(id, peer), joined->id));
          return joined;
        }
        log(fmt::format("{}{}: a handle space of its process (pidfd from {})", kLogDebug, describe_peer(id, peer),
                        process.way));
        made->process = process.key;
        made->exit = std::move(process.exit);
      }
    }
    made->space = std::make_unique<HandleSpace>(rm_, id, limits, peer);
    if (o_.client_front) {
      auto front = o_.client_front(*made->space);
      if (!front.ok()) {
        log(std::string(kLogErr) + "a client's front could not be made: " + front.error().message() +
            ": connection closed");
        return nullptr;
      }
      made->front = std::move(*front);
    }
    made->active_at = now_ns();
    return &spaces_.add(std::move(made));
  }

  // Room on a front (ClientConnection::front) for a newcomer: when it is
  // full, the idlest connection of the uid holding most there is closed for
  // it (connection_share.h), else it is refused. A uid with
  // max_clients_per_uid open already (every front) is refused.
  bool has_room(const std::string& front, const PeerIdentity& peer) {
    if (peer.uid) {
      const size_t of_uid = static_cast<size_t>(std::count_if(
          clients_.begin(), clients_.end(), [&](const auto& c) { return !c->closed && c->uid == peer.uid; }));
      if (of_uid >= o_.max_clients_per_uid) {
        log(fmt::format("uid {}: {} connections already: connection refused", *peer.uid, of_uid));
        return false;
      }
    }
    std::vector<Client*> on;
    std::vector<ConnectionView> views;
    for (const auto& c : clients_) {
      if (c->closed || c->front != front) continue;
      on.push_back(c.get());
      const bool idle =
          !c->queued && c->conn.input().empty() && !c->conn.buffered() && !c->conn.sending() && !c->conn.closing();
      views.push_back({c->uid, idle, c->active_at});
    }
    const std::string& name = front;
    if (on.size() < o_.max_clients) return true;
    std::optional<size_t> victim = connection_to_close(views, peer.uid);
    const std::string who = peer.uid ? fmt::format("uid {}", *peer.uid) : "a client without a uid";
    if (!victim) {
      log(fmt::format("{}: {} clients already: {}'s connection refused", name, on.size(), who));
      return false;
    }
    Client& idlest = *on[*victim];
    log(fmt::format("{}: {} clients already: an idle connection of {} (the uid holding most) closed for {}'s", name,
                    on.size(), idlest.uid ? fmt::format("uid {}", *idlest.uid) : "no uid", who));
    drop(idlest);
    return true;
  }

  int64_t timeout_ns(const Client& c) const { return int64_t{c.limits.frame_timeout_ms} * 1'000'000; }

  // Reads what the protocol asks for; a whole request joins the queue.
  void read_request(Client& c, int64_t now) {
    const Protocol& protocol = *c.protocol;
    for (;;) {
      Parse p = protocol.parse(c.conn.input(), c.limits.max_frame_bytes);
      if (p.kind == Parse::Kind::kNeed) {
        Connection::Read r = c.conn.read(p.need);
        if (r == Connection::Read::kMore) continue;
        if (r == Connection::Read::kClosed) {
          if (c.conn.input().empty()) {
            drop(c);
          } else {
            refuse(c, protocol.truncated(c.conn.input()));
          }
          return;
        }
        c.conn.update_deadline(now, timeout_ns(c));
        if (!c.conn.input().empty()) c.active_at = now;
        return;
      }
      if (p.kind == Parse::Kind::kRefuse) {
        refuse(c, std::move(p));
        return;
      }
      c.queued = true;
      c.active_at = now;
      c.conn.restart_deadline();  // the server owes it now
      queue_.push_back(c.id);
      return;
    }
  }

  void serve_queue() {
    while (!queue_.empty() && !shutdown_) {
      const ClientId id = queue_.front();
      queue_.pop_front();
      auto it = std::find_if(clients_.begin(), clients_.end(), [&](const auto& c) { return c->id == id; });
      if (it == clients_.end() || (*it)->closed) continue;
      Client& c = **it;
      c.queued = false;
      Port port(*this, c);
      Served served = c.protocol->serve(c.conn.input(), port);
      c.conn.input().clear();
      c.conn.restart_deadline();
      if (!served.answer.empty() && !c.conn.send(served.answer)) {
        drop(c);
        continue;
      }
      if (served.close) c.conn.close_after_answer();
      c.active_at = now_ns();
      c.conn.update_deadline(c.active_at, timeout_ns(c));
      if (c.conn.closing() && !c.conn.sending()) drop(c);
    }
  }

  void refuse(Client& c, Parse p) {
    if (!p.why.empty()) log(p.why);
    c.conn.input().clear();
    if (!p.answer.empty() && !c.conn.send(p.answer)) {
      drop(c);
      return;
    }
    c.conn.close_after_answer();
    c.conn.update_deadline(now_ns(), timeout_ns(c));
    if (!c.conn.sending()) drop(c);
  }

  // Dropped for stalling: whatever a truncated request gets, then closed.
  void stalled(Client& c) {
    ++dropped_;
    log(fmt::format("a client stalled for {} ms {}: connection closed", c.limits.frame_timeout_ms,
                    c.conn.sending() ? "without reading its answer" : "in the middle of a request"));
    if (!c.conn.sending() && !c.conn.input().empty()) {
      Parse p = c.protocol->truncated(c.conn.input());
      if (!p.answer.empty()) (void)c.conn.send(p.answer);
    }
    drop(c);
  }

  void drop(Client& c) {
    if (c.closed) return;
    c.closed = true;
    // Its space ends with it unless its process lives on (process_spaces.h):
    // the front first, which may flush what it holds through the space.
    if (c.shared) spaces_.leave(*c.shared, now_ns());
    c.shared = nullptr;
    if (c.on_closed) c.on_closed();
  }

  Transport& tpm_;
  ServerOptions o_;
  ResourceManager rm_;
  ProcessSpaces spaces_;  // after rm_: destroyed first, so what the spaces hold is flushed
  Fd wake_r_, wake_w_;
  // Before clients_: a client's on_closed may reach its source (the D-Bus
  // front), so the sources outlive every client.
  std::vector<std::unique_ptr<PollSource>> sources_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<pollfd> fds_;  // serve()'s, kept for its capacity
  std::deque<ClientId> queue_;
  std::mutex mu_;  // pending_, last_id_, loop_thread_
  std::vector<Pending> pending_;
  std::atomic<bool> has_pending_{false};  // pending_ is not empty (stored under mu_)
  ClientId last_id_ = 0;
  std::thread::id loop_thread_;
  uint64_t dropped_ = 0;
  uint64_t commands_ = 0;
  bool shutdown_ = false;
};

Result<std::unique_ptr<Server>> Server::create(Transport& tpm, ServerOptions options) {
  auto impl = std::make_unique<Impl>(tpm, std::move(options));
  TPMSEC_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() {
  impl_->close_all();
  impl_->shut();
}

Result<ClientId> Server::connect(ClientConnection client) { return impl_->connect(std::move(client)); }
void Server::add_source(std::unique_ptr<PollSource> source) { impl_->add_source(std::move(source)); }
Status Server::run(const std::atomic<bool>& stop) { return impl_->run(stop); }
ServerStats Server::stats() const { return impl_->stats(); }
ResourceManager& Server::resources() { return impl_->resources(); }

}  // namespace tpmsec::server
