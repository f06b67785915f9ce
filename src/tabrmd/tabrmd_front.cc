#include "tpmsec/tabrmd/tabrmd_front.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace tpmsec::tabrmd {

struct TabrmdFront::Impl {
  server::Server& server;
  server::ClientLimits limits;
  std::unique_ptr<TabrmdBus> bus;
  OwnedFd wake_r, wake_w;  // closed() and the destructor wake the thread
  std::mutex mu;
  std::vector<server::ClientId> closed_clients;  // guarded by mu
  std::map<server::ClientId, uint64_t> bus_ids;  // the thread's own
  bool stopping = false;                         // guarded by mu
  std::optional<Error> failure;                  // guarded by mu
  std::function<void()> on_failure;
  std::thread thread;

  Impl(server::Server& s, server::ClientLimits l) : server(s), limits(l) {}

  void wake() {
    const char b = 0;
    (void)!::write(wake_w.get(), &b, 1);
  }

  void connection(OwnedFd fd, uint64_t id, const BusPeer& peer) {
    server::PeerIdentity who;
    if (peer.uid != static_cast<uid_t>(-1)) who.uid = static_cast<uint32_t>(peer.uid);
    if (peer.pid > 0) who.pid = static_cast<uint32_t>(peer.pid);
    Result<server::ClientId> client = server.add_client(fd.release(), limits, who);
    if (!client.ok()) {
      bus->connection_closed(id);
      return;
    }
    bus_ids[*client] = id;
  }

  void free_closed() {
    std::vector<server::ClientId> done;
    {
      std::lock_guard<std::mutex> lock(mu);
      done.swap(closed_clients);
    }
    for (server::ClientId c : done) {
      auto it = bus_ids.find(c);
      if (it == bus_ids.end()) continue;
      bus->connection_closed(it->second);
      bus_ids.erase(it);
    }
  }

  void run() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stopping) return;
      }
      pollfd fds[2] = {{bus->fd(), bus->events(), 0}, {wake_r.get(), POLLIN, 0}};
      if (::poll(fds, 2, bus->timeout_ms()) < 0 && errno != EINTR) {
        fail(runtime_error(fmt::format("polling the bus: {}", std::strerror(errno))));
        return;
      }
      char buf[64];
      while (::read(wake_r.get(), buf, sizeof(buf)) > 0) {
      }
      free_closed();
      if (Status st = bus->process(); !st.ok()) {
        fail(st.error());
        return;
      }
    }
  }

  void fail(Error e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      failure = std::move(e);
    }
    if (on_failure) on_failure();
  }
};

Result<std::unique_ptr<TabrmdFront>> TabrmdFront::start(const TabrmdBusOptions& options, server::Server& server,
                                                        server::ClientLimits limits, std::function<void()> on_failure) {
  auto impl = std::make_unique<Impl>(server, limits);
  impl->on_failure = std::move(on_failure);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return runtime_error("tabrmd: pipe failed");
  impl->wake_r = OwnedFd(pipe_fds[0]);
  impl->wake_w = OwnedFd(pipe_fds[1]);
  TabrmdCallbacks callbacks;
  Impl* raw = impl.get();
  callbacks.on_connection = [raw](OwnedFd fd, uint64_t id, const BusPeer& peer) {
    raw->connection(std::move(fd), id, peer);
  };
  // Every command goes to the TPM at locality 0 (a TPM device takes no other
  // from user space): any other is NotImplemented, as tpm2-abrmd 3.0 answers.
  callbacks.on_set_locality = [](uint64_t, uint8_t locality) { return locality == 0 ? 0u : kResmgrRcNotImplemented; };
  TPMSEC_ASSIGN_OR_RETURN(impl->bus, TabrmdBus::open(options, std::move(callbacks)));
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<TabrmdFront>(new TabrmdFront(std::move(impl)));
}

TabrmdFront::TabrmdFront(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TabrmdFront::~TabrmdFront() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void TabrmdFront::closed(server::ClientId client) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->closed_clients.push_back(client);
  }
  impl_->wake();
}

std::optional<Error> TabrmdFront::failure() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->failure;
}

}  // namespace tpmsec::tabrmd
