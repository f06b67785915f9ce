// tpm2-abrmd's D-Bus interface on sd-bus (include/tpmsec-server/tabrmd/tabrmd_bus.h).
#include "tpmsec-server/tabrmd/tabrmd_bus.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <systemd/sd-bus.h>

namespace tpmsec::tabrmd {

namespace {

// The D-Bus error names tpm2-abrmd registers for its codes (src/tabrmd-error.c):
// the client's GDBus turns them back into TSS2_RESMGR_RC_*.
constexpr const char* kErrorGeneral = "com.intel.tss2.Tabrmd.Error.General";
constexpr const char* kErrorInternal = "com.intel.tss2.Tabrmd.Error.Internal";
constexpr const char* kErrorNotImplemented = "com.intel.tss2.Tabrmd.Error.NotImplemented";
constexpr const char* kErrorNotPermitted = "com.intel.tss2.Tabrmd.Error.NotPermitted";

// How long one reply may wait for the bus socket to take it: the bus daemon
// reads continuously, so only a wedged daemon reaches this.
constexpr int kReplyWriteTimeoutMs = 5000;

// A D-Bus METHOD_RETURN (D-Bus specification, "Message Format") with
// signature "t" and one file descriptor the body does not name: what
// tpm2-abrmd's GDBus sends (g_dbus_method_invocation_return_value_with_unix_fd_list
// with a "(t)" tuple) and what the client's proxy checks the reply against.
// sd-bus attaches descriptors only through an 'h' in the body, which would
// make the signature "th" and the client refuse the reply, so this one
// message is marshalled here. Little-endian; the daemon adds SENDER.
class ReplyWriter {
 public:
  std::vector<uint8_t> build(uint32_t serial, uint32_t reply_serial, std::string_view destination, uint64_t id) {
    out_.clear();
    u8('l');
    u8(2);    // METHOD_RETURN
    u8(0x1);  // NO_REPLY_EXPECTED
    u8(1);    // protocol version
    u32(8);   // body length: one uint64
    u32(serial);
    size_t fields_len_at = out_.size();
    u32(0);  // the header fields' array length, patched below
    size_t fields_start = out_.size();
    field_u32(5, reply_serial);         // REPLY_SERIAL
    field_string(6, 's', destination);  // DESTINATION
    field_string(8, 'g', "t");          // SIGNATURE
    field_u32(9, 1);                    // UNIX_FDS
    put_u32_at(fields_len_at, static_cast<uint32_t>(out_.size() - fields_start));
    align(8);
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(id >> (8 * i)));
    return out_;
  }

 private:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) {
    align(4);
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void put_u32_at(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  void align(size_t n) {
    while (out_.size() % n) out_.push_back(0);
  }
  void field_signature(uint8_t code, char type) {
    align(8);
    u8(code);
    u8(1);
    u8(static_cast<uint8_t>(type));
    u8(0);
  }
  void field_u32(uint8_t code, uint32_t v) {
    field_signature(code, 'u');
    u32(v);
  }
  void field_string(uint8_t code, char type, std::string_view s) {
    field_signature(code, type);
    if (type == 'g') {
      u8(static_cast<uint8_t>(s.size()));
    } else {
      u32(static_cast<uint32_t>(s.size()));
    }
    out_.insert(out_.end(), s.begin(), s.end());
    u8(0);
  }
  std::vector<uint8_t> out_;
};

// Writes `data` to the (non-blocking) bus socket, `fd_to_pass` riding on its
// first byte. Returns how many bytes went out; an error only when none did,
// so a caller knows whether the stream is still at a message boundary.
Result<size_t> send_with_fd(int sock, const std::vector<uint8_t>& data, int fd_to_pass) {
  size_t sent = 0;
  while (sent < data.size()) {
    iovec iov{const_cast<uint8_t*>(data.data()) + sent, data.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (sent == 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
    }
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{sock, POLLOUT, 0};
      int r = ::poll(&p, 1, kReplyWriteTimeoutMs);
      if (r > 0) continue;
      if (r < 0 && errno == EINTR) continue;
      if (sent == 0) return runtime_error("the bus socket took no reply for 5 s");
      return sent;
    }
    if (sent == 0) return runtime_error(fmt::format("writing to the bus: {}", std::strerror(errno)));
    return sent;
  }
  return sent;
}

}  // namespace

struct TabrmdBus::Impl {
  sd_bus* bus = nullptr;
  sd_bus_slot* object_slot = nullptr;
  TabrmdCallbacks callbacks;
  size_t max_connections = 0;
  std::map<uint64_t, BusPeer> connections;  // live ids and who made them
  // Our own serials for the messages marshalled here, apart from sd-bus's
  // (which counts up from 1): a method return's serial names nothing the
  // daemon or the client matches on, but it must not be 0.
  uint32_t raw_serial = 0x80000000u;
  // A reply went out in part: the stream is no longer at a message boundary
  // and the bus connection cannot be used any more.
  std::string broken;
  // CreateConnection calls waiting for the bus daemon's word on their caller
  // (GetConnectionCredentials, asked asynchronously: the server's loop never
  // waits for the daemon's answer).
  struct Asking {
    Impl* self;
    sd_bus_message* call;  // referenced until answered
    sd_bus_slot* slot = nullptr;
  };
  std::map<Asking*, std::unique_ptr<Asking>> asking;

  ~Impl() {
    for (auto& [key, a] : asking) {
      sd_bus_slot_unref(a->slot);
      sd_bus_message_unref(a->call);
    }
    if (object_slot) sd_bus_slot_unref(object_slot);
    if (bus) sd_bus_flush_close_unref(bus);
  }

  // The live connection `id`, if the caller of `m` created it.
  const BusPeer* owned_by_caller(sd_bus_message* m, uint64_t id) const {
    auto it = connections.find(id);
    if (it == connections.end()) return nullptr;
    const char* sender = sd_bus_message_get_sender(m);
    if (!sender || it->second.unique_name != sender) return nullptr;
    return &it->second;
  }

  static int create_connection(sd_bus_message* m, void* userdata, sd_bus_error* error);
  static int credentials(sd_bus_message* answer, void* userdata, sd_bus_error* error);
  int connect(sd_bus_message* m, const BusPeer& peer, sd_bus_error* error);
  static int cancel(sd_bus_message* m, void* userdata, sd_bus_error* error);
  static int set_locality(sd_bus_message* m, void* userdata, sd_bus_error* error);
  static const sd_bus_vtable kVtable[];
};

int TabrmdBus::Impl::create_connection(sd_bus_message* m, void* userdata, sd_bus_error* error) {
  auto* self = static_cast<Impl*>(userdata);
  if (!sd_bus_message_get_expect_reply(m)) return 0;  // nobody would receive the descriptor
  if (self->connections.size() + self->asking.size() >= self->max_connections) {
    return sd_bus_error_set(error, kErrorGeneral, "MAX_COMMANDS exceeded. Try again later.");
  }
  const char* sender = sd_bus_message_get_sender(m);
  uint64_t reply_serial = 0;
  if (!sender || sd_bus_message_get_cookie(m, &reply_serial) < 0 || reply_serial > UINT32_MAX) {
    return sd_bus_error_set(error, kErrorInternal, "Failed to identify the caller");
  }
  // Who the caller is, from the bus daemon (GetConnectionCredentials), as
  // tpm2-abrmd asks it for the caller's PID; the reply to the caller waits
  // for its answer (credentials()), the loop does not.
  auto asking = std::make_unique<Asking>(Asking{self, sd_bus_message_ref(m)});
  int r = sd_bus_call_method_async(self->bus, &asking->slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                   "org.freedesktop.DBus", "GetConnectionCredentials", credentials, asking.get(), "s",
                                   sender);
  if (r < 0) {
    sd_bus_message_unref(asking->call);
    return sd_bus_error_set(error, kErrorInternal, "Failed to get client PID");
  }
  Asking* key = asking.get();
  self->asking.emplace(key, std::move(asking));
  return 1;  // answered once the daemon answered
}

namespace {

// The daemon's a{sv} of the caller's credentials: UnixUserID and ProcessID.
bool read_credentials(sd_bus_message* answer, BusPeer& peer) {
  bool uid = false, pid = false;
  if (sd_bus_message_enter_container(answer, 'a', "{sv}") < 0) return false;
  while (sd_bus_message_enter_container(answer, 'e', "sv") > 0) {
    const char* key = nullptr;
    if (sd_bus_message_read(answer, "s", &key) < 0) return false;
    uint32_t value = 0;
    if (std::string_view(key) == "UnixUserID" || std::string_view(key) == "ProcessID") {
      if (sd_bus_message_read(answer, "v", "u", &value) < 0) return false;
      if (std::string_view(key) == "UnixUserID") {
        peer.uid = static_cast<uid_t>(value);
        uid = true;
      } else {
        peer.pid = static_cast<pid_t>(value);
        pid = true;
      }
    } else if (sd_bus_message_skip(answer, "v") < 0) {
      return false;
    }
    if (sd_bus_message_exit_container(answer) < 0) return false;
  }
  return uid && pid && sd_bus_message_exit_container(answer) >= 0;
}

}  // namespace

int TabrmdBus::Impl::credentials(sd_bus_message* answer, void* userdata, sd_bus_error*) {
  auto* asking = static_cast<Asking*>(userdata);
  Impl* self = asking->self;
  std::unique_ptr<Asking> done = std::move(self->asking[asking]);
  self->asking.erase(asking);
  sd_bus_message* call = done->call;
  BusPeer peer;
  peer.unique_name = sd_bus_message_get_sender(call);
  sd_bus_error error = SD_BUS_ERROR_NULL;
  int r = 0;
  if (sd_bus_message_is_method_error(answer, nullptr) || !read_credentials(answer, peer)) {
    sd_bus_error_set(&error, kErrorInternal, "Failed to get client PID");
  } else {
    r = self->connect(call, peer, &error);
  }
  if (sd_bus_error_is_set(&error)) {
    r = sd_bus_reply_method_error(call, &error);
  } else if (r < 0) {
    r = sd_bus_reply_method_errno(call, r, nullptr);
  }
  sd_bus_error_free(&error);
  sd_bus_slot_unref(done->slot);
  sd_bus_message_unref(call);
  return r < 0 ? r : 1;
}

// The connection for CreateConnection `m` of `peer`: a socket pair, the
// client's end in the reply, the server's handed over.
int TabrmdBus::Impl::connect(sd_bus_message* m, const BusPeer& peer, sd_bus_error* error) {
  uint64_t reply_serial = 0;
  (void)sd_bus_message_get_cookie(m, &reply_serial);  // read once already
  uint64_t id = 0;
  for (int tries = 0; id == 0 || connections.count(id); ++tries) {
    if (tries == 8 || ::getrandom(&id, sizeof(id), 0) != sizeof(id)) {
      return sd_bus_error_set(error, kErrorGeneral, "Failed to allocate connection ID. Try again later.");
    }
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    return sd_bus_error_set(error, kErrorInternal, "Failed to create the connection's socket pair");
  }
  OwnedFd server_end(pair[0]);
  OwnedFd client_end(pair[1]);

  // Everything sd-bus queued goes out first, so the stream is at a message
  // boundary when the marshalled reply is written behind it.
  int r = sd_bus_flush(bus);
  if (r < 0) return r;
  std::vector<uint8_t> reply =
      ReplyWriter().build(raw_serial++, static_cast<uint32_t>(reply_serial), peer.unique_name, id);
  if (raw_serial == 0) raw_serial = 0x80000000u;
  Result<size_t> sent = send_with_fd(sd_bus_get_fd(bus), reply, client_end.get());
  if (!sent.ok()) return sd_bus_error_set(error, kErrorInternal, sent.error().message().c_str());
  if (*sent < reply.size()) {
    broken = "a CreateConnection reply was cut short on the bus socket";
    return 0;
  }
  client_end = OwnedFd();  // the client has its own copy now
  connections.emplace(id, peer);
  if (callbacks.on_connection) {
    callbacks.on_connection(std::move(server_end), id, peer);
  } else {
    connections.erase(id);  // nobody serves it: the client sees the hang-up
  }
  return 1;
}

int TabrmdBus::Impl::cancel(sd_bus_message* m, void* userdata, sd_bus_error* error) {
  auto* self = static_cast<Impl*>(userdata);
  uint64_t id = 0;
  int r = sd_bus_message_read(m, "t", &id);
  if (r < 0) return r;
  if (!self->owned_by_caller(m, id)) return sd_bus_error_set(error, kErrorNotPermitted, "No connection.");
  // tpm2-abrmd 3.0 does not cancel either (on_handle_cancel).
  return sd_bus_error_set(error, kErrorNotImplemented, "Cancel function not implemented.");
}

int TabrmdBus::Impl::set_locality(sd_bus_message* m, void* userdata, sd_bus_error* error) {
  auto* self = static_cast<Impl*>(userdata);
  uint64_t id = 0;
  uint8_t locality = 0;
  int r = sd_bus_message_read(m, "ty", &id, &locality);
  if (r < 0) return r;
  if (!self->owned_by_caller(m, id)) return sd_bus_error_set(error, kErrorNotPermitted, "No connection.");
  if (!self->callbacks.on_set_locality) {
    return sd_bus_error_set(error, kErrorNotImplemented, "setLocality function not implemented.");
  }
  uint32_t rc = self->callbacks.on_set_locality(id, locality);
  return sd_bus_reply_method_return(m, "u", rc);
}

// Who may call is the bus policy's to say (packaging/dbus/tpmsec.conf, as
// tpm2-abrmd's), hence UNPRIVILEGED: sd-bus would otherwise demand the
// caller's uid or CAP_SYS_ADMIN on the system bus. Names and signatures as
// tpm2-abrmd's src/tabrmd.xml, so introspection reads the same.
const sd_bus_vtable TabrmdBus::Impl::kVtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD_WITH_NAMES("CreateConnection", "", "", "t", SD_BUS_PARAM(id), create_connection,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("Cancel", "t", SD_BUS_PARAM(id), "u", SD_BUS_PARAM(return_code), cancel,
                             SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_METHOD_WITH_NAMES("SetLocality", "ty", SD_BUS_PARAM(id) SD_BUS_PARAM(locality), "u",
                             SD_BUS_PARAM(return_code), set_locality, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

namespace {

Error bus_error(const std::string& what, int r) {
  return runtime_error(fmt::format("{}: {}", what, std::strerror(-r)));
}

}  // namespace

Result<std::unique_ptr<TabrmdBus>> TabrmdBus::open(const TabrmdBusOptions& options, TabrmdCallbacks callbacks) {
  auto impl = std::make_unique<Impl>();
  impl->callbacks = std::move(callbacks);
  impl->max_connections = options.max_connections;
  const bool system = options.bus == TabrmdBusOptions::Bus::kSystem;
  const char* which = system ? "the system bus" : "the session bus";
  int r;
  if (options.address.empty()) {
    r = system ? sd_bus_open_system(&impl->bus) : sd_bus_open_user(&impl->bus);
  } else {
    r = sd_bus_new(&impl->bus);
    if (r >= 0) r = sd_bus_set_address(impl->bus, options.address.c_str());
    if (r >= 0) r = sd_bus_set_bus_client(impl->bus, 1);
    if (r >= 0) r = sd_bus_negotiate_fds(impl->bus, 1);
    if (r >= 0) r = sd_bus_start(impl->bus);
  }
  if (r < 0) return bus_error(fmt::format("connecting to {}", which), r);
  // CreateConnection hands the client a descriptor: a bus that cannot carry
  // one (a TCP bus) cannot serve a single client.
  if (sd_bus_can_send(impl->bus, SD_BUS_TYPE_UNIX_FD) <= 0) {
    return runtime_error(fmt::format("{} does not pass file descriptors (CreateConnection needs it)", which));
  }
  r = sd_bus_add_object_vtable(impl->bus, &impl->object_slot, kTabrmdObjectPath, kTabrmdInterface, Impl::kVtable,
                               impl.get());
  if (r < 0) return bus_error("exporting " + std::string(kTabrmdObjectPath), r);
  r = sd_bus_request_name(impl->bus, options.name.c_str(), 0);
  if (r == -EEXIST || r == -EALREADY) {
    return runtime_error(fmt::format("{} is already owned on {} (is tpm2-abrmd running?)", options.name, which));
  }
  if (r == -EACCES || r == -EPERM) {
    return runtime_error(fmt::format("{} refuses this user ({}) the name {}: its policy lets user tss or root own it",
                                     which, ::getuid(), options.name));
  }
  if (r < 0) return bus_error(fmt::format("taking the name {} on {}", options.name, which), r);
  return std::unique_ptr<TabrmdBus>(new TabrmdBus(std::move(impl)));
}

TabrmdBus::TabrmdBus(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TabrmdBus::~TabrmdBus() = default;

int TabrmdBus::fd() const { return sd_bus_get_fd(impl_->bus); }

short TabrmdBus::events() const {
  int e = sd_bus_get_events(impl_->bus);
  return e < 0 ? POLLIN : static_cast<short>(e);
}

int TabrmdBus::timeout_ms() const {
  uint64_t at = 0;
  if (sd_bus_get_timeout(impl_->bus, &at) < 0 || at == UINT64_MAX) return -1;
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t now_us = static_cast<uint64_t>(now.tv_sec) * 1000000u + static_cast<uint64_t>(now.tv_nsec) / 1000u;
  if (at <= now_us) return 0;
  uint64_t ms = (at - now_us + 999) / 1000;
  return ms > INT32_MAX ? INT32_MAX : static_cast<int>(ms);
}

Status TabrmdBus::process() {
  for (;;) {
    if (!impl_->broken.empty()) return runtime_error(impl_->broken);
    int r = sd_bus_process(impl_->bus, nullptr);
    if (r < 0) return bus_error("the bus connection", r);
    if (r == 0) return ok_status();
  }
}

void TabrmdBus::connection_closed(uint64_t id) { impl_->connections.erase(id); }

size_t TabrmdBus::open_connections() const { return impl_->connections.size(); }

}  // namespace tpmsec::tabrmd
