// `tpmsec emulate PROFILE --port P`: a profiled chip for any TPM stack. The
// embedded libtpms served over swtpm's TCP protocol (data port P, control
// port P+1, as tpm2-tss's swtpm TCTI and tpmsec's swtpm: transport speak it)
// or the Microsoft simulator's (mssim TCTI), reporting the profile's identity
// and taking the profile's latency on every command: slept (--clock real) or
// only accounted (--clock virtual).
//
// Protocols, as documented by their projects:
//   swtpm data channel: the raw TPM command, the raw response.
//   swtpm control channel (swtpm's include/swtpm/tpm_ioctl.h, "commands used
//     by the non-CUSE TPMs"): a big-endian u32 command code and its request
//     fields; the answer is the response fields, starting with a u32 result.
//   mssim TPM port (tpm2-tss tcti-mssim, TpmTcpProtocol.h): u32
//     TPM_SEND_COMMAND (8), u8 locality, u32 size, the command; answered by
//     u32 size, the response, u32 0. TPM_SESSION_END (20) ends a connection.
//   mssim platform port: u32 signal (power on/off, NV on, reset, ...),
//     answered by u32 0.
//
// One client per port at a time, as swtpm: while one data connection is
// served, the next waits in the listen backlog until it closes.
//
// --private-handles: handles as /dev/tpmrm0 keeps them (linux
// drivers/char/tpm/tpm2-space.c). The kernel gives each client a space of
// its own: a transient object a client's command created is context-saved
// and flushed from the TPM after every command (tpm2_save_space) and only
// its saved blob is dropped when the client closes; a session a response
// named (tpm2_map_response_header: the command's TPMA_CC rHandle, a session
// handle) is flushed with FlushContext when the client closes
// (tpm2_del_space -> tpm2_flush_sessions), unless the kernel forgot it
// earlier because its own ContextSave found it not loaded (the client
// flushed or saved it, or the TPM ended it). So when a data connection
// closes, the server flushes the transient objects and the loaded sessions
// created during it and still present; a session the client saved itself
// stays, as on Linux. "Created during it": named by a successful response
// of a command with rHandle (read from the TPM's TPM_CAP_COMMANDS at start,
// as the kernel's tpm2_get_cc_attrs_tbl does), or absent from the listing
// taken when the connection opened. Handles present then and not re-created
// stay. The listings go to libtpms directly: they stand for the kernel's own
// bookkeeping, which sends no TPM command, and are neither billed nor
// logged. The FlushContexts are billed and logged as any command: a
// tpmrm sends them (for a transient object it sends one after each
// command; one per object at the close is the lower bound). The kernel's
// per-command ContextLoad/ContextSave of a client's objects and sessions is
// not modelled, for any client.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "cli.h"
#include "progress.h"
#include "tpmsec/bench.h"
#include "tpmsec/constants.h"
#include "tpmsec/handle_ledger.h"
#include "tpmsec/latency_model.h"
#include "tpmsec/slot_limits.h"
#include "tpmsec/response_code.h"
#include "tpmsec/transports.h"
#include "tpmsec/wire.h"
#include "transport/socket_io.h"

namespace tpmsec::cli {
namespace emulate_server {

constexpr uint32_t kMaxCommand = 4096;      // libtpms's TPM_BUFFER_MAX: larger frames are malformed
constexpr int kFrameTimeoutMs = 5'000;      // the rest of a frame, once its first byte arrived
constexpr int kPollMs = 200;                // how often a signal is noticed while idle
constexpr uint32_t kRcBadTag = 0x01E;       // TPM_RC_BAD_TAG
constexpr uint32_t kRcCommandSize = 0x142;  // TPM_RC_COMMAND_SIZE
constexpr uint32_t kCcGetCapability = 0x17A;
constexpr uint32_t kCcFlushContext = 0x165;
constexpr uint32_t kRHandle = 1u << 28;          // TPMA_CC rHandle (Part 2 §8.9)
constexpr uint32_t kCommandCodeBits = 0x2000FFFF;  // TPMA_CC commandIndex and V: the TPM_CC

uint16_t load_be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// swtpm control channel (tpm_ioctl.h).
namespace ctrl {
constexpr uint32_t kGetCapability = 0x01, kInit = 0x02, kShutdown = 0x03, kGetTpmEstablished = 0x04,
                   kSetLocality = 0x05, kHashStart = 0x06, kHashData = 0x07, kHashEnd = 0x08, kCancel = 0x09,
                   kStoreVolatile = 0x0a, kResetTpmEstablished = 0x0b, kStop = 0x0e, kGetConfig = 0x0f,
                   kSetBufferSize = 0x11;
constexpr uint32_t kInitDeleteVolatile = 1;
// PTM_CAP_* of what is implemented here.
constexpr uint32_t kCaps = 1 /*INIT*/ | 2 /*SHUTDOWN*/ | 4 /*GET_TPMESTABLISHED*/ | 8 /*SET_LOCALITY*/ |
                           0x20 /*CANCEL_TPM_CMD*/ | 0x40 /*STORE_VOLATILE*/ | 0x80 /*RESET_TPMESTABLISHED*/ |
                           0x400 /*STOP*/ | 0x800 /*GET_CONFIG*/ | 0x2000 /*SET_BUFFERSIZE*/;
constexpr uint32_t kResultFail = 0x09;          // TPM_FAIL (TPM 1.2 codes, as swtpm answers)
constexpr uint32_t kResultBadParameter = 0x03;  // TPM_BAD_PARAMETER
constexpr uint32_t kResultBadOrdinal = 0x0a;    // TPM_BAD_ORDINAL
}  // namespace ctrl

// mssim (TpmTcpProtocol.h).
namespace ms {
constexpr uint32_t kPowerOn = 1, kPowerOff = 2, kPhysPresOn = 3, kPhysPresOff = 4, kSendCommand = 8, kCancelOn = 9,
                   kCancelOff = 10, kNvOn = 11, kNvOff = 12, kKeyCacheOn = 13, kKeyCacheOff = 14, kReset = 17,
                   kRestart = 18, kSessionEnd = 20, kStop = 21;
}  // namespace ms

struct Options {
  std::string profile;
  uint16_t port = 0;
  std::string host = "127.0.0.1";
  std::string state;
  std::string clock = "real";
  std::string protocol = "swtpm";
  std::string json;
  std::string trace;
  bool quiet = false;
  bool means = false;
  bool private_handles = false;
};

Bytes error_response(uint32_t code) {
  Writer w;
  w.u16(st::kNoSessions);
  w.u32(10);
  w.u32(code);
  auto b = w.finish();
  return b.ok() ? *b : Bytes{};
}

// Replaces the identity properties (TPM_PT_MANUFACTURER, vendor strings,
// firmware) in an unauthenticated GetCapability(TPM_PROPERTIES) answer with
// the profile's. An answer in a session is left alone: its HMAC covers the
// real values, so an audited read sees the real TPM (docs/threat-model.md).
void rewrite_identity(Bytes& response, ByteView command, const TpmInfo& identity) {
  if (command.size() < 14 || load_be16(command.data()) != st::kNoSessions ||
      load_be32(command.data() + 6) != kCcGetCapability || response.size() < 19 ||
      load_be16(response.data()) != st::kNoSessions || load_be32(response.data() + 6) != rc::kSuccess ||
      load_be32(response.data() + 11) != cap::kTpmProperties) {
    return;
  }
  uint32_t count = load_be32(response.data() + 15);
  size_t at = 19;
  for (uint32_t i = 0; i < count && at + 8 <= response.size(); ++i, at += 8) {
    uint32_t property = load_be32(response.data() + at);
    std::optional<uint32_t> value;
    if (property == pt::kManufacturer) value = identity.manufacturer_raw;
    if (property >= pt::kVendorString1 && property <= pt::kVendorString4) {
      value = identity.vendor_raw[property - pt::kVendorString1];
    }
    if (property == pt::kFirmwareVersion1) value = identity.firmware_version_1;
    if (property == pt::kFirmwareVersion2) value = identity.firmware_version_2;
    if (value) store_be32(response.data() + at + 4, *value);
  }
}

struct Totals {
  size_t count = 0;
  double ms = 0;
};

class Server {
 public:
  Server(Options options, LatencyProfile profile, std::unique_ptr<Transport> tpm, const std::atomic<bool>* stop)
      : o_(std::move(options)),
        model_(profile, o_.means ? ModelOptions{std::nullopt, false, 0.0} : ModelOptions{}),
        profile_(std::move(profile)),
        tpm_(std::move(tpm)),
        chip_(*tpm_, profile_.slots),
        stop_(stop) {}

  Status start() {
    TPMSEC_ASSIGN_OR_RETURN(real_info_, read_identity());
    identity_ = emulated_info(profile_, real_info_);
    if (o_.private_handles) {
      TPMSEC_ASSIGN_OR_RETURN(handle_creating_, read_handle_creating());
    }
    TPMSEC_ASSIGN_OR_RETURN(data_listen_, listen_on(o_.port));
    TPMSEC_ASSIGN_OR_RETURN(ctrl_listen_, listen_on(static_cast<uint16_t>(o_.port + 1)));
    started_ns_ = clock_.now_ns();
    fmt::print(stderr, "tpmsec emulate: {} ({}) on {}:{} (data) and {}:{} ({}), {} protocol, {} clock{}{}\n",
               profile_.id, profile_.name, o_.host, o_.port, o_.host, o_.port + 1,
               o_.protocol == "mssim" ? "platform" : "control", o_.protocol, o_.clock,
               o_.means ? ", at the profile's means" : "",
               o_.private_handles ? ", private handles (a closing client's objects and sessions are flushed)" : "");
    return ok_status();
  }

  // Serves until a signal, CMD_SHUTDOWN or TPM_STOP.
  Status run() {
    while (!stop_->load() && !shutdown_) {
      std::vector<pollfd> fds;
      fds.push_back({data_.valid() ? data_.get() : data_listen_.get(), POLLIN, 0});
      fds.push_back({ctrl_.valid() ? ctrl_.get() : ctrl_listen_.get(), POLLIN, 0});
      int ready = ::poll(fds.data(), fds.size(), kPollMs);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return runtime_error(fmt::format("emulate: poll failed: {}", std::strerror(errno)));
      }
      if (ready == 0) continue;
      if (fds[0].revents) {
        if (data_.valid()) {
          if (!serve_data()) {
            data_ = io::Fd();
            client_closed();
          }
        } else {
          data_ = accept_on(data_listen_);
          if (data_.valid()) client_connected();
        }
      }
      if (fds[1].revents && !shutdown_) {
        if (ctrl_.valid()) {
          if (!serve_ctrl()) ctrl_ = io::Fd();
        } else {
          ctrl_ = accept_on(ctrl_listen_);
        }
      }
    }
    return ok_status();
  }

  // Per-command totals on stderr; the bench result of everything served.
  BenchResult result() const {
    BenchResult r;
    r.tpm = to_json(identity_);
    r.transport = fmt::format("tpmsec emulate {} ({}:{}, {} protocol, {} clock)", profile_.id, o_.host, o_.port,
                              o_.protocol, o_.clock);
    r.virtual_clock = true;  // every TPM time below is the model's, also when it was slept
    r.date = utc_timestamp();
    r.version = TPMSEC_VERSION;
    r.options.iterations = 0;
    r.options.pcr = 0;
    r.options.bank = 0;
    r.options.checkpoint_every = 0;
    r.options.strategies.clear();
    std::map<std::string, PrimitiveResult> by_label;
    std::vector<std::string> order;
    for (const TraceRecord& rec : records_) {
      std::string label = command_label(rec.shape);
      if (!by_label.count(label)) {
        order.push_back(label);
        by_label[label].name = label;
      }
      Sample s;
      s.start_ns = rec.start_ns;
      s.total_ms = s.tpm_ms = static_cast<double>(rec.duration_ns) / 1e6;
      s.commands = {rec};
      by_label[label].samples.push_back(std::move(s));
    }
    for (const auto& label : order) {
      PrimitiveResult p = std::move(by_label[label]);
      std::vector<double> ms;
      for (const auto& s : p.samples) ms.push_back(s.tpm_ms);
      p.tpm_ms = summarize(ms);
      r.primitives.push_back(std::move(p));
    }
    return r;
  }

  void print_totals() const {
    double total = 0;
    for (const auto& [variant, t] : totals_) total += t.ms;
    fmt::print(stderr, "tpmsec emulate: {} TPM commands, {:.2f} ms modelled TPM time ({} clock)\n", records_.size(),
               total, o_.clock);
    if (totals_.empty()) return;
    fmt::print(stderr, "  {:<32} {:>7} {:>12} {:>10}\n", "command", "count", "total ms", "mean ms");
    for (const auto& [variant, t] : totals_) {
      fmt::print(stderr, "  {:<32} {:>7} {:>12.2f} {:>10.2f}\n", variant, t.count, t.ms,
                 t.ms / static_cast<double>(t.count));
    }
  }

 private:
  Result<TpmInfo> read_identity() {
    Tpm tpm(*tpm_);
    return read_tpm_info(tpm);
  }

  // The commands whose response carries a handle (TPMA_CC rHandle), from the
  // TPM's own TPM_CAP_COMMANDS, read from libtpms directly (not billed).
  Result<std::set<uint32_t>> read_handle_creating() {
    Tpm tpm(*tpm_);
    std::set<uint32_t> out;
    uint32_t property = 0;
    for (int page = 0; page < 8; ++page) {
      TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(cmd::GetCapability{cap::kCommands, property, 256}));
      const auto& attributes = rsp.capability_data.commands;
      for (uint32_t a : attributes) {
        if (a & kRHandle) out.insert(a & kCommandCodeBits);
      }
      if (!rsp.more_data || attributes.empty()) break;
      uint32_t next = (attributes.back() & kCommandCodeBits) + 1;
      if (next <= property) break;
      property = next;
    }
    if (out.empty()) return runtime_error("emulate: the TPM lists no command that returns a handle");
    return out;
  }

  // The transient objects and loaded sessions (by HandleLedger::slot), or
  // saved sessions too, that libtpms holds now; listed directly, not billed.
  Result<std::vector<uint32_t>> present_handles(bool saved_sessions) {
    Tpm tpm(*tpm_);
    std::vector<uint32_t> out;
    for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, 0x03000000u}) {
      if (first == 0x03000000u && !saved_sessions) continue;
      TPMSEC_ASSIGN_OR_RETURN(auto listed, tpm.list_handles(first));
      out.insert(out.end(), listed.begin(), listed.end());
    }
    return out;
  }

  // --private-handles: what is present when a client connects stays.
  void client_connected() {
    if (!o_.private_handles) return;
    present_at_connect_.clear();
    created_.clear();
    auto present = powered_ ? present_handles(true) : Result<std::vector<uint32_t>>(std::vector<uint32_t>{});
    if (!present.ok()) {
      log("private handles: cannot list the TPM's handles: " + present.error().message());
      listing_failed_ = true;
      return;
    }
    listing_failed_ = false;
    for (uint32_t h : *present) present_at_connect_.insert(HandleLedger::slot(h));
    log(fmt::format("client connected (private handles: {} present before it stay)", present_at_connect_.size()));
  }

  // --private-handles: a closing client's transient objects and loaded
  // sessions are flushed, billed and logged as commands.
  void client_closed() {
    if (!o_.private_handles) return;
    size_t flushed = 0;
    auto present = powered_ && !listing_failed_ ? present_handles(false)
                                                : Result<std::vector<uint32_t>>(std::vector<uint32_t>{});
    if (!present.ok()) log("private handles: cannot list the TPM's handles: " + present.error().message());
    for (uint32_t h : present.ok() ? *present : std::vector<uint32_t>{}) {
      uint32_t slot = HandleLedger::slot(h);
      if (present_at_connect_.count(slot) && !created_.count(slot)) continue;
      Writer w;
      w.u16(st::kNoSessions);
      w.u32(14);
      w.u32(kCcFlushContext);
      w.u32(h);
      auto command = w.finish();
      if (!command.ok()) continue;
      Bytes response = execute(*command, locality_);
      if (response.size() >= 10 && load_be32(response.data() + 6) == rc::kSuccess) ++flushed;
    }
    present_at_connect_.clear();
    created_.clear();
    log(fmt::format("client closed (private handles: flushed {} it left)", flushed));
  }

  Result<io::Fd> listen_on(uint16_t port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* list = nullptr;
    int gai = getaddrinfo(o_.host.c_str(), std::to_string(port).c_str(), &hints, &list);
    if (gai != 0) return usage_error(fmt::format("emulate: cannot resolve --host {}: {}", o_.host, gai_strerror(gai)));
    std::string last = "no address";
    for (addrinfo* ai = list; ai; ai = ai->ai_next) {
      io::Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!fd.valid()) continue;
      int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd.get(), 8) == 0) {
        freeaddrinfo(list);
        return fd;
      }
      last = std::strerror(errno);
    }
    freeaddrinfo(list);
    return runtime_error(fmt::format("emulate: cannot listen on {}:{}: {}", o_.host, port, last));
  }

  io::Fd accept_on(const io::Fd& listener) {
    io::Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) {
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
  }

  void log(const std::string& line) const {
    if (!o_.quiet) fmt::print(stderr, "tpmsec emulate: {}\n", line);
  }

  // False at a clean end of the stream (nothing of a new frame arrived).
  static bool peer_closed(int fd) {
    uint8_t b;
    ssize_t n = ::recv(fd, &b, 1, MSG_PEEK);
    return n <= 0;
  }

  Status read_bounded(int fd, MutableByteView out) const {
    return io::read_exact(fd, out, kFrameTimeoutMs, "emulate client");
  }

  // One frame on the data port; false closes the connection.
  bool serve_data() {
    int fd = data_.get();
    if (peer_closed(fd)) return false;
    uint8_t locality = locality_;
    if (o_.protocol == "mssim") {
      uint8_t head[4];
      if (!read_bounded(fd, head).ok()) return false;
      uint32_t code = load_be32(head);
      if (code == ms::kSessionEnd) return false;
      if (code != ms::kSendCommand) {
        log(fmt::format("mssim TPM port: unsupported code {}: connection closed", code));
        return false;
      }
      uint8_t loc_size[5];
      if (!read_bounded(fd, loc_size).ok()) return false;
      locality = loc_size[0];
      uint32_t size = load_be32(loc_size + 1);
      if (size < 10 || size > kMaxCommand || locality > 4) {
        log(fmt::format("malformed mssim frame (size {}, locality {}): connection closed", size, locality));
        return false;
      }
      Bytes command(size);
      if (!read_bounded(fd, command).ok()) return false;
      Bytes response = execute(command, locality);
      Writer w;
      w.u32(static_cast<uint32_t>(response.size()));
      w.bytes(response);
      w.u32(0);
      auto framed = w.finish();
      return framed.ok() && io::write_all(fd, *framed, "emulate client").ok();
    }
    Bytes command(10);
    if (!read_bounded(fd, command).ok()) return false;
    uint16_t tag = load_be16(command.data());
    uint32_t size = load_be32(command.data() + 2);
    if ((tag != st::kNoSessions && tag != st::kSessions) || size < 10 || size > kMaxCommand) {
      log(fmt::format("malformed command frame (tag 0x{:04x}, size {}): error response, connection closed", tag,
                      size));
      (void)io::write_all(fd, error_response(tag == st::kNoSessions || tag == st::kSessions ? kRcCommandSize
                                                                                            : kRcBadTag),
                          "emulate client");
      return false;
    }
    command.resize(size);
    if (!read_bounded(fd, MutableByteView(command).subspan(10)).ok()) return false;
    Bytes response = execute(command, locality);
    return io::write_all(fd, response, "emulate client").ok();
  }

  // Runs one command on libtpms and applies the model: the response after
  // the modelled time (--clock real) or at once (virtual).
  Bytes execute(const Bytes& command, uint8_t locality) {
    int64_t start = clock_.now_ns();
    int64_t real_start = real_.now_ns();
    (void)embedded_set_locality(*tpm_, locality);  // swtpm: CMD_SET_LOCALITY's; mssim: the frame's
    // Through the chip's slot and context-gap limits (slot_limits.h).
    auto result = powered_ ? chip_.transmit(command) : Result<Bytes>(runtime_error("the TPM is powered off"));
    Bytes response;
    if (result.ok()) {
      response = std::move(*result);
    } else {
      log("libtpms: " + result.error().message());
      response = error_response(rc::kFailure);
    }
    rewrite_identity(response, command, identity_.info);
    if (o_.private_handles && command.size() >= 10 && response.size() >= 14 &&
        load_be32(response.data() + 6) == rc::kSuccess && handle_creating_.count(load_be32(command.data() + 6))) {
      created_.insert(HandleLedger::slot(load_be32(response.data() + 10)));
    }
    CommandShape shape = shape_of(command, response);
    ModelledLatency m = model_.model(shape);
    auto modelled = static_cast<int64_t>(std::llround(m.total_ms * 1e6));
    if (o_.clock == "real") {
      // Sleep out what libtpms did not take; a signal cuts it short.
      while (!stop_->load()) {
        int64_t left = modelled - (real_.now_ns() - real_start);
        if (left <= 0) break;
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(left, 50'000'000)));
      }
    }
    clock_.adjust(modelled - (real_.now_ns() - real_start));
    records_.push_back({shape, start, modelled});
    Totals& t = totals_[m.variant];
    ++t.count;
    t.ms += m.total_ms;
    log(fmt::format("{:<28} rc 0x{:03x} {:9.2f} ms", m.variant, shape.response_code, m.total_ms));
    return response;
  }

  // One control message; false closes the connection.
  bool serve_ctrl() {
    int fd = ctrl_.get();
    if (peer_closed(fd)) return false;
    uint8_t head[4];
    if (!read_bounded(fd, head).ok()) return false;
    uint32_t code = load_be32(head);
    Writer w;
    bool keep = o_.protocol == "mssim" ? mssim_signal(fd, code, w) : swtpm_control(fd, code, w);
    auto answer = w.finish();
    if (!answer.ok() || (!answer->empty() && !io::write_all(fd, *answer, "emulate control client").ok())) return false;
    return keep;
  }

  // Reads `n` request bytes of a control command; false (and TPM_BAD_PARAMETER)
  // when they do not arrive.
  bool request(int fd, MutableByteView out, Writer& w) {
    if (read_bounded(fd, out).ok()) return true;
    log("control channel: truncated request: error answer, connection closed");
    w.u32(ctrl::kResultBadParameter);
    return false;
  }

  bool swtpm_control(int fd, uint32_t code, Writer& w) {
    switch (code) {
      case ctrl::kGetCapability:
        w.u32(0);
        w.u32(ctrl::kCaps);
        return true;
      case ctrl::kInit: {
        uint8_t flags[4];
        if (!request(fd, flags, w)) return false;
        Status s = embedded_tpm_init(*tpm_, load_be32(flags) & ctrl::kInitDeleteVolatile);
        powered_ = s.ok();
        log(s.ok() ? "control: _TPM_Init (CMD_INIT)" : "control: CMD_INIT failed: " + s.error().message());
        w.u32(s.ok() ? 0 : ctrl::kResultFail);
        return true;
      }
      case ctrl::kShutdown:
      case ctrl::kStop:
        (void)embedded_power_off(*tpm_);
        powered_ = false;
        log(code == ctrl::kStop ? "control: TPM stopped (CMD_STOP)" : "control: CMD_SHUTDOWN: stopping");
        if (code == ctrl::kShutdown) shutdown_ = true;
        w.u32(0);
        return true;
      case ctrl::kGetTpmEstablished:
        w.u32(0);
        w.u8(0);
        return true;
      case ctrl::kSetLocality:
      case ctrl::kResetTpmEstablished: {
        uint8_t loc[1];
        if (!request(fd, loc, w)) return false;
        if (loc[0] > 4) {
          log(fmt::format("control: locality {} refused", loc[0]));
          w.u32(ctrl::kResultBadParameter);
          return true;
        }
        if (code == ctrl::kSetLocality) locality_ = loc[0];
        w.u32(0);
        return true;
      }
      case ctrl::kHashStart:
      case ctrl::kHashEnd:
        w.u32(0);  // no DRTM sequence is modelled: accepted, no effect
        return true;
      case ctrl::kHashData: {
        uint8_t len[4];
        if (!request(fd, len, w)) return false;
        uint32_t n = load_be32(len);
        if (n > kMaxCommand) {
          log(fmt::format("control: CMD_HASH_DATA of {} bytes refused: connection closed", n));
          w.u32(ctrl::kResultBadParameter);
          return false;
        }
        Bytes data(n);
        if (!request(fd, data, w)) return false;
        w.u32(0);
        return true;
      }
      case ctrl::kCancel:
      case ctrl::kStoreVolatile:
        w.u32(0);
        return true;
      case ctrl::kGetConfig:
        w.u32(0);
        w.u32(0);  // no file or migration key
        return true;
      case ctrl::kSetBufferSize: {
        uint8_t size[4];
        if (!request(fd, size, w)) return false;
        w.u32(0);
        w.u32(kMaxCommand);
        w.u32(kMaxCommand);
        w.u32(kMaxCommand);
        return true;
      }
      default:
        log(fmt::format("control: unknown command 0x{:x}: TPM_BAD_ORDINAL, connection closed", code));
        w.u32(ctrl::kResultBadOrdinal);
        return false;  // its request fields are unknown: the framing is lost
    }
  }

  bool mssim_signal(int, uint32_t code, Writer& w) {
    switch (code) {
      case ms::kPowerOn:
        if (!powered_) {
          Status s = embedded_tpm_init(*tpm_, false);
          powered_ = s.ok();
          log(s.ok() ? "platform: power on (_TPM_Init)" : "platform: power on failed: " + s.error().message());
        }
        w.u32(0);
        return true;
      case ms::kPowerOff:
        (void)embedded_power_off(*tpm_);
        powered_ = false;
        log("platform: power off");
        w.u32(0);
        return true;
      case ms::kReset:
      case ms::kRestart: {
        Status s = embedded_tpm_init(*tpm_, false);
        powered_ = s.ok();
        log(s.ok() ? "platform: reset (_TPM_Init)" : "platform: reset failed: " + s.error().message());
        w.u32(0);
        return true;
      }
      case ms::kPhysPresOn:
      case ms::kPhysPresOff:
      case ms::kCancelOn:
      case ms::kCancelOff:
      case ms::kNvOn:
      case ms::kNvOff:
      case ms::kKeyCacheOn:
      case ms::kKeyCacheOff:
        w.u32(0);
        return true;
      case ms::kSessionEnd:
        return false;  // no answer: the client closes
      case ms::kStop:
        log("platform: TPM_STOP: stopping");
        shutdown_ = true;
        w.u32(0);
        return false;
      default:
        log(fmt::format("platform: unknown signal {}: connection closed", code));
        return false;
    }
  }

  Options o_;
  LatencyModel model_;
  LatencyProfile profile_;
  std::unique_ptr<Transport> tpm_;
  SlotLimitTransport chip_;
  const std::atomic<bool>* stop_;
  TpmInfo real_info_;
  EmulatedIdentity identity_;
  io::Fd data_listen_, ctrl_listen_, data_, ctrl_;
  SteadyClock real_;
  VirtualClock clock_;
  int64_t started_ns_ = 0;
  uint8_t locality_ = 0;
  bool powered_ = true;
  bool shutdown_ = false;
  std::vector<TraceRecord> records_;
  std::map<std::string, Totals> totals_;
  // --private-handles (see the top of this file).
  std::set<uint32_t> handle_creating_;     // TPM_CCs with rHandle
  std::set<uint32_t> present_at_connect_;  // slots present when the client connected
  std::set<uint32_t> created_;             // slots its successful responses named
  bool listing_failed_ = false;
};

Status run(const Options& o) {
  if (o.port == 0 || o.port == 65535) return usage_error("emulate: --port must be 1..65534 (the control port is P+1)");
  if (o.clock != "real" && o.clock != "virtual") {
    return usage_error(fmt::format("emulate: --clock must be real or virtual, got '{}'", o.clock));
  }
  if (o.protocol != "swtpm" && o.protocol != "mssim") {
    return usage_error(fmt::format("emulate: --protocol must be swtpm or mssim, got '{}'", o.protocol));
  }
  TPMSEC_RETURN_IF_ERROR(check_outputs({o.json, o.trace}));
  auto profile = load_profile(o.profile);
  if (!profile.ok()) return input_file_error(profile.error());
  if (std::string w = provenance_warning(*profile); !w.empty()) fmt::print(stderr, "tpmsec: warning: {}\n", w);
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> tpm, open_embedded(o.state));
  StopOnInterrupt interrupt;
  Server server(o, std::move(*profile), std::move(tpm), interrupt.flag());
  TPMSEC_RETURN_IF_ERROR(server.start());
  Status served = server.run();
  server.print_totals();
  BenchResult r = server.result();
  if (!o.json.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.json, bench_json(r).dump(2) + "\n"));
  if (!o.trace.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.trace, bench_trace(r).dump() + "\n"));
  return served;
}

}  // namespace emulate_server

void register_emulate(CLI::App& app, Action* action) {
  auto o = std::make_shared<emulate_server::Options>();
  CLI::App* sub = app.add_subcommand(
      "emulate",
      "Serve a profiled TPM chip to any TPM stack: the embedded libtpms on swtpm's TCP protocol (data port P, "
      "control port P+1; tpm2-tss TCTI swtpm:host=H,port=P, tpmsec --tpm swtpm:host=H,port=P,ctrl=P+1) or mssim's, "
      "reporting the profile's identity and taking its latency on every command");
  sub->add_option("PROFILE", o->profile, "Latency profile: a name (see tpmsec profiles) or a path")->required();
  sub->add_option("--port", o->port, "Data port P; the control (swtpm) or platform (mssim) port is P+1")->required();
  sub->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  sub->add_option("--state", o->state,
                  "Keep the TPM's NV state in DIR (as embedded:state=DIR); default: in memory, fresh per run");
  sub->add_option("--clock", o->clock,
                  "real: each response waits out the modelled time, as on the chip; virtual: answer at once and "
                  "only account the modelled time")
      ->capture_default_str();
  sub->add_option("--protocol", o->protocol, "swtpm (swtpm socket --server/--ctrl type=tcp) or mssim")
      ->capture_default_str();
  sub->add_flag("--means", o->means, "Model every command at the profile's mean (no jitter, no tail events)");
  sub->add_flag("--private-handles", o->private_handles,
                "As /dev/tpmrm0: when a client's data connection closes, flush the transient objects and loaded "
                "sessions it created that are still there (billed and logged as FlushContext); handles present "
                "when it connected stay. Clients may then skip their handle listing (tpmsec: "
                "--tpm swtpm:...,handles=private). For tpm2-tss use --protocol mssim and its mssim: TCTI (one "
                "connection per context): its swtpm: TCTI connects per command");
  sub->add_option("--json", o->json, "On exit, write the per-command modelled times as a bench result (tpmsec compare)");
  sub->add_option("--trace", o->trace, "On exit, write the commands as Chrome trace events (Perfetto)");
  sub->add_flag("-q,--quiet", o->quiet, "No line per command on stderr");
  sub->footer(
      "One client per port at a time, as swtpm: a second connection waits until the first closes. Stops on "
      "SIGINT, SIGTERM or the control channel's CMD_SHUTDOWN (mssim: TPM_STOP), then prints per-command totals "
      "and writes --json/--trace. A GetCapability answer in a session (an audited identity read) reports the "
      "real libtpms identity: its HMAC covers it.");
  sub->callback([o, action] { *action = [o] { return emulate_server::run(*o); }; });
}

}  // namespace tpmsec::cli
