// tpmsec serve: one process owns the TPM and other programs reach it through
// tpm2-abrmd's D-Bus interface (com.intel.tss2.Tabrmd) and a Unix socket.
//
// PLACEHOLDER SERVER. What stands behind the front ends here is a plain
// pass-through relay (PassThroughRelay below): each client's frames go to
// the TPM unchanged, one at a time, with no session, no handle isolation and
// no limits but the frame size. It exists so the D-Bus front end, the units
// and the packaging can be tested with real clients; the protected, isolating
// server (src/server: per-client handle spaces, scheduler) replaces it, fed
// through the same three calls: a new client's descriptor, SetLocality, and
// TabrmdBus::connection_closed() when a client is gone.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>

#include <fmt/format.h>

#include "cli.h"
#include "tpmsec/constants.h"
#include "tpmsec/server/tabrmd_bus.h"

namespace tpmsec::cli {
namespace {

using server::OwnedFd;

constexpr size_t kHeaderBytes = 10;

// THE LEAD REPLACES THIS with the protected server (src/server).
class PassThroughRelay {
 public:
  explicit PassThroughRelay(Transport& tpm) : tpm_(tpm) {}

  void add_client(OwnedFd fd, uint64_t bus_id) { clients_.push_back(Client{std::move(fd), bus_id, {}}); }
  void set_bus(server::TabrmdBus* bus) { bus_ = bus; }

  void add_pollfds(std::vector<pollfd>& fds) const {
    for (const Client& c : clients_) fds.push_back(pollfd{c.fd.get(), POLLIN, 0});
  }
  // After poll: serves every client whose descriptor is readable or hung up.
  void serve(const std::vector<pollfd>& fds, size_t first) {
    size_t i = first;
    for (auto it = clients_.begin(); it != clients_.end(); ++i) {
      bool ready = i < fds.size() && (fds[i].revents & (POLLIN | POLLHUP | POLLERR));
      if (ready && !read_and_answer(*it)) {
        if (bus_ && it->bus_id) bus_->connection_closed(it->bus_id);
        it = clients_.erase(it);
      } else {
        ++it;
      }
    }
  }

 private:
  struct Client {
    OwnedFd fd;
    uint64_t bus_id;  // 0: a socket client
    Bytes pending;
  };

  // False when the client is gone or broke the framing.
  bool read_and_answer(Client& c) {
    uint8_t buf[4096];
    ssize_t n = ::read(c.fd.get(), buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;
    c.pending.insert(c.pending.end(), buf, buf + n);
    while (c.pending.size() >= kHeaderBytes) {
      uint32_t size = (uint32_t{c.pending[2]} << 24) | (uint32_t{c.pending[3]} << 16) |
                      (uint32_t{c.pending[4]} << 8) | c.pending[5];
      if (size < kHeaderBytes || size > kMaxCommandBytes) return false;
      if (c.pending.size() < size) break;
      Bytes command(c.pending.begin(), c.pending.begin() + size);
      c.pending.erase(c.pending.begin(), c.pending.begin() + size);
      Result<Bytes> response = tpm_.transmit(command);
      if (!response.ok()) {
        fmt::print(stderr, "tpmsec serve: the TPM: {}\n", response.error().message());
        return false;
      }
      if (!write_all(c.fd.get(), *response)) return false;
    }
    return true;
  }

  // A client that does not read its answers fills its socket and is
  // dropped: it never stalls the others.
  static bool write_all(int fd, const Bytes& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  Transport& tpm_;
  server::TabrmdBus* bus_ = nullptr;
  std::list<Client> clients_;
};

// The listening socket systemd passed (tpmsec.socket: sd_listen_fds(3)'s
// protocol, LISTEN_PID and LISTEN_FDS, the first descriptor 3), if any.
OwnedFd activation_socket() {
  const char* pid = ::getenv("LISTEN_PID");
  const char* count = ::getenv("LISTEN_FDS");
  if (!pid || !count || std::string(pid) != std::to_string(::getpid()) || std::string(count) != "1") return OwnedFd();
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::fcntl(3, F_SETFD, FD_CLOEXEC);
  return OwnedFd(3);
}

// A socket bound here at PATH, 0660 as the kernel gives /dev/tpmrm0.
Result<OwnedFd> bind_socket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return usage_error("--socket: the path is too long for a Unix socket");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  OwnedFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  mode_t old = ::umask(0117);
  int r = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (r != 0) return runtime_error(fmt::format("binding {}: {}", path, std::strerror(errno)));
  if (::listen(fd.get(), 16) != 0) return runtime_error(fmt::format("listening on {}: {}", path, std::strerror(errno)));
  return fd;
}

Status serve(const std::string& tpm_string, const std::string& dbus, const std::string& dbus_address,
             const std::string& socket_path) {
  OwnedFd listener = activation_socket();
  if (dbus == "none" && socket_path.empty() && !listener.valid()) {
    return usage_error("nothing to serve: give --dbus system|session or --socket PATH");
  }
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> tpm, open_transport(tpm_string));
  PassThroughRelay relay(*tpm);
  fmt::print(stderr, "tpmsec serve: placeholder pass-through relay: client commands reach {} UNPROTECTED\n",
             tpm->describe());

  // SIGTERM and SIGINT end the loop; read from a descriptor, never a handler.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  OwnedFd signals(::signalfd(-1, &stop, SFD_CLOEXEC));
  if (!signals.valid()) return runtime_error(fmt::format("signalfd: {}", std::strerror(errno)));

  std::unique_ptr<server::TabrmdBus> bus;
  if (dbus != "none") {
    server::TabrmdBusOptions options;
    options.bus = dbus == "session" ? server::TabrmdBusOptions::Bus::kSession : server::TabrmdBusOptions::Bus::kSystem;
    options.address = dbus_address;
    server::TabrmdCallbacks callbacks;
    callbacks.on_connection = [&relay](OwnedFd fd, uint64_t id, const server::BusPeer&) {
      relay.add_client(std::move(fd), id);
    };
    // Every command goes to the TPM at locality 0: say so for any other.
    callbacks.on_set_locality = [](uint64_t, uint8_t locality) {
      return locality == 0 ? 0u : server::kResmgrRcNotImplemented;
    };
    TPMSEC_ASSIGN_OR_RETURN(bus, server::TabrmdBus::open(options, std::move(callbacks)));
    relay.set_bus(bus.get());
  }
  // A socket bound here is removed when the server ends (systemd's is systemd's).
  struct Unlink {
    std::string path;
    ~Unlink() {
      if (!path.empty()) ::unlink(path.c_str());
    }
  } bound;
  if (!listener.valid() && !socket_path.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(listener, bind_socket(socket_path));
    bound.path = socket_path;
  }

  for (;;) {
    std::vector<pollfd> fds{{signals.get(), POLLIN, 0}};
    int timeout = -1;
    if (bus) {
      fds.push_back(pollfd{bus->fd(), bus->events(), 0});
      timeout = bus->timeout_ms();
    }
    if (listener.valid()) fds.push_back(pollfd{listener.get(), POLLIN, 0});
    size_t first_client = fds.size();
    relay.add_pollfds(fds);
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      return runtime_error(fmt::format("poll: {}", std::strerror(errno)));
    }
    if (fds[0].revents) return ok_status();
    size_t i = 1;
    if (bus) {
      TPMSEC_RETURN_IF_ERROR(bus->process());
      ++i;
    }
    if (listener.valid() && (fds[i].revents & POLLIN)) {
      OwnedFd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (client.valid()) relay.add_client(std::move(client), 0);
    }
    relay.serve(fds, first_client);
  }
}

}  // namespace

void register_serve(CLI::App& app, Action* action) {
  struct Options {
    std::string tpm;
    std::string dbus = "system";
    std::string dbus_address;
    std::string socket;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Own the TPM and serve other programs: tpm2-abrmd's D-Bus interface and a Unix socket");
  sub->add_option("--tpm", o->tpm, "The TPM to own, a TPM string (device:/dev/tpm0 on a host)")->required();
  sub->add_option("--dbus", o->dbus,
                  "Which bus to take com.intel.tss2.Tabrmd on: system (default), session, or none")
      ->check(CLI::IsMember({"system", "session", "none"}))
      ->capture_default_str();
  sub->add_option("--dbus-address", o->dbus_address, "Connect to this D-Bus address instead of the bus's default");
  sub->add_option("--socket", o->socket,
                  "Also serve a Unix socket at PATH (one command written, one response read), unless systemd "
                  "passed one (tpmsec.socket)");
  sub->callback([o, action] {
    *action = [o]() -> Status { return serve(o->tpm, o->dbus, o->dbus_address, o->socket); };
  });
}

}  // namespace tpmsec::cli
