// The server's loop (tpmsec/emulation/server/emulation_server.h): one thread polls the two
// listening sockets and every client connection; a connection's request is
// read as far as its channel asks, and a whole request is served at once,
// one at a time on the one chip.
#include "tpmsec/emulation/server/emulation_server.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "emulation/server/channel.h"
#include "emulation/server/connection.h"
#include "emulation/server/emulated_chip.h"
#include "emulation/server/listener.h"
#include "emulation/server/private_handles.h"

namespace tpmsec {

using emulation::Channel;
using emulation::Connection;

namespace {
constexpr int kPollMs = 200;  // how often a stop is noticed while idle
}  // namespace

class EmulationServer::Impl {
 public:
  Impl(EmulationServerOptions options, LatencyProfile profile, std::unique_ptr<Transport> tpm,
       const std::atomic<bool>* stop)
      : o_(std::move(options)),
        stop_(stop),
        chip_(o_, std::move(profile), std::move(tpm), stop, [this](const std::string& l) { log(l); }),
        handles_(chip_, [this](const std::string& l) { log(l); }),
        data_channel_(o_.protocol == ServerProtocol::kMssim ? emulation::mssim_tpm_channel()
                                                            : emulation::swtpm_data_channel()),
        ctrl_channel_(o_.protocol == ServerProtocol::kMssim ? emulation::mssim_platform_channel()
                                                            : emulation::swtpm_control_channel()) {}

  Status start() {
    TPMSEC_RETURN_IF_ERROR(chip_.start());
    if (o_.private_handles) TPMSEC_RETURN_IF_ERROR(handles_.start());
    TPMSEC_ASSIGN_OR_RETURN(data_listen_, emulation::listen_on(o_.host, o_.port));
    TPMSEC_ASSIGN_OR_RETURN(ctrl_listen_, emulation::listen_on(o_.host, static_cast<uint16_t>(o_.port + 1)));
    const LatencyProfile& p = chip_.profile();
    fmt::print(stderr, "tpmsec emulate: {} ({}) on {}:{} (data) and {}:{} ({}), {} protocol, {} clock{}{}\n", p.id,
               p.name, o_.host, o_.port, o_.host, o_.port + 1, mssim() ? "platform" : "control", protocol_name(),
               clock_name(), o_.means ? ", at the profile's means" : "",
               o_.private_handles ? ", private handles (a closing client's objects and sessions are flushed)" : "");
    return ok_status();
  }

  Status run() {
    while (!stop_->load() && !shutdown_) {
      std::vector<pollfd> fds{{data_listen_.get(), POLLIN, 0}, {ctrl_listen_.get(), POLLIN, 0}};
      for (const auto& c : connections_) {
        fds.push_back({c->fd(), static_cast<short>(c->sending() ? POLLOUT : POLLIN), 0});
      }
      int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
      if (ready < 0 && errno != EINTR) {
        return runtime_error(fmt::format("emulate: poll failed: {}", std::strerror(errno)));
      }
      const int64_t now = real_.now_ns();
      // Open connections first, in the order they came: a close a client
      // sent before another connected is handled before that one's commands.
      const size_t open = connections_.size();
      for (size_t i = 0; i < open && !shutdown_; ++i) {
        Connection& c = *connections_[i];
        const short revents = ready > 0 ? fds[2 + i].revents : 0;
        if (revents & POLLOUT) {
          if (!c.flush()) drop(c);
        } else if (revents & (POLLIN | POLLHUP | POLLERR)) {
          serve(c, now);
        }
        if (!closed_.count(c.id()) && c.deadline() && *c.deadline() <= now) stalled(c);
        if (c.closing() && !c.sending()) drop(c);
      }
      std::erase_if(connections_, [this](const auto& c) { return closed_.count(c->id()) > 0; });
      closed_.clear();
      if (ready > 0 && !shutdown_) {
        if (fds[0].revents) admit(data_listen_, *data_channel_);
        if (fds[1].revents) admit(ctrl_listen_, *ctrl_channel_);
      }
    }
    // The last answers (CMD_SHUTDOWN's, TPM_STOP's) go out before the sockets close.
    for (const auto& c : connections_) (void)c->flush();
    return ok_status();
  }

  std::string totals() const { return chip_.served().totals(clock_name()); }

  BenchResult result() const {
    return chip_.served().result(chip_.identity(),
                                 fmt::format("tpmsec emulate {} ({}:{}, {} protocol, {} clock)", chip_.profile().id,
                                             o_.host, o_.port, protocol_name(), clock_name()));
  }

  EmulationServerStats stats() const {
    EmulationServerStats s;
    s.commands = chip_.served().commands();
    s.records = chip_.served().records();
    s.variants = chip_.served().variants();
    s.clients = connections_.size();
    s.handle_entries = handles_.entries();
    s.dropped = dropped_;
    return s;
  }

 private:
  // What a channel may do, for one client.
  class Port final : public emulation::ChipPort {
   public:
    Port(Impl& server, uint64_t client) : s_(server), client_(client) {}
    Bytes execute(ByteView command) override { return execute_at(command, s_.locality_); }
    Bytes execute_at(ByteView command, uint8_t locality) override {
      if (s_.o_.private_handles) s_.handles_.before(client_, command, locality);
      Bytes response = s_.chip_.execute(command, locality);
      if (s_.o_.private_handles) s_.handles_.answered(client_, command, response);
      return response;
    }
    Status tpm_init(bool delete_volatile) override { return s_.chip_.platform().tpm_init(delete_volatile); }
    void power_off() override { s_.chip_.platform().power_off(); }
    bool powered() const override { return s_.chip_.platform().powered(); }
    void set_locality(uint8_t locality) override { s_.locality_ = locality; }
    void stop_serving() override { s_.shutdown_ = true; }
    void log(const std::string& line) override { s_.log(line); }

   private:
    Impl& s_;
    uint64_t client_;
  };

  bool mssim() const { return o_.protocol == ServerProtocol::kMssim; }
  std::string protocol_name() const { return mssim() ? "mssim" : "swtpm"; }
  std::string clock_name() const { return o_.real_clock ? "real" : "virtual"; }
  int64_t timeout_ns() const { return int64_t{o_.frame_timeout_ms} * 1'000'000; }

  void log(const std::string& line) const {
    if (!o_.quiet) fmt::print(stderr, "tpmsec emulate: {}\n", line);
  }

  // Until the next deadline, at most kPollMs.
  int poll_timeout_ms() const {
    int64_t wait = int64_t{kPollMs} * 1'000'000;
    const int64_t now = real_.now_ns();
    for (const auto& c : connections_) {
      if (c->deadline()) wait = std::min(wait, std::max<int64_t>(*c->deadline() - now, 0));
    }
    return static_cast<int>((wait + 999'999) / 1'000'000);
  }

  void admit(const io::Fd& listener, const Channel& channel) {
    io::Fd fd = emulation::accept_client(listener);
    if (!fd.valid()) return;
    const size_t on_port = static_cast<size_t>(
        std::count_if(connections_.begin(), connections_.end(), [&](const auto& c) { return &c->channel() == &channel; }));
    if (on_port >= o_.max_clients) {
      log(fmt::format("{} port: {} clients already: connection refused", channel.carries_commands() ? "data" : "control",
                      on_port));
      return;  // closed by fd's destructor
    }
    const uint64_t id = ++last_id_;
    connections_.push_back(std::make_unique<Connection>(std::move(fd), channel, id));
    if (o_.private_handles && channel.carries_commands()) handles_.connected(id);
  }

  // Reads what the channel asks for; serves a whole request.
  void serve(Connection& c, int64_t now) {
    const Channel& channel = c.channel();
    for (;;) {
      emulation::Parse p = channel.parse(c.input());
      if (p.kind == emulation::Parse::Kind::kNeed) {
        Connection::Read r = c.read(p.need);
        if (r == Connection::Read::kMore) continue;
        if (r == Connection::Read::kClosed) {
          if (c.input().empty()) {
            drop(c);
          } else {
            refuse(c, channel.truncated(c.input()));
          }
          return;
        }
        c.update_deadline(now, timeout_ns());
        return;
      }
      if (p.kind == emulation::Parse::Kind::kRefuse) {
        refuse(c, std::move(p));
        return;
      }
      Port port(*this, c.id());
      emulation::Served served = channel.serve(c.input(), port);
      c.input().clear();
      c.restart_deadline();
      if (!served.answer.empty() && !c.send(served.answer)) {
        drop(c);
        return;
      }
      if (served.close) c.close_after_answer();
      c.update_deadline(real_.now_ns(), timeout_ns());
      return;  // one request per connection per round: the others' turn
    }
  }

  void refuse(Connection& c, emulation::Parse p) {
    if (!p.why.empty()) log(p.why);
    c.input().clear();
    if (!p.answer.empty() && !c.send(p.answer)) {
      drop(c);
      return;
    }
    c.close_after_answer();
    c.update_deadline(real_.now_ns(), timeout_ns());
  }

  // Dropped for stalling: whatever a truncated request gets, then closed.
  void stalled(Connection& c) {
    ++dropped_;
    log(fmt::format("a client stalled for {} ms {}: connection closed", o_.frame_timeout_ms,
                    c.sending() ? "without reading its answer" : "in the middle of a request"));
    if (!c.sending() && !c.input().empty()) {
      emulation::Parse p = c.channel().truncated(c.input());
      if (!p.answer.empty()) (void)c.send(p.answer);
    }
    drop(c);
  }

  void drop(Connection& c) {
    if (closed_.count(c.id())) return;
    closed_.insert(c.id());
    if (o_.private_handles && c.channel().carries_commands()) handles_.closed(c.id(), locality_);
  }

  EmulationServerOptions o_;
  const std::atomic<bool>* stop_;
  emulation::EmulatedChip chip_;
  emulation::PrivateHandles handles_;
  std::unique_ptr<Channel> data_channel_;
  std::unique_ptr<Channel> ctrl_channel_;
  io::Fd data_listen_, ctrl_listen_;
  std::vector<std::unique_ptr<Connection>> connections_;
  std::set<uint64_t> closed_;
  SteadyClock real_;
  uint64_t last_id_ = 0;
  uint64_t dropped_ = 0;
  uint8_t locality_ = 0;  // CMD_SET_LOCALITY's, for the swtpm data channel
  bool shutdown_ = false;
};

Result<std::unique_ptr<EmulationServer>> EmulationServer::start(EmulationServerOptions options, LatencyProfile profile,
                                                                 std::unique_ptr<Transport> tpm,
                                                                 const std::atomic<bool>* stop) {
  if (options.port == 0 || options.port == 65535) {
    return usage_error("emulate: --port must be 1..65534 (the control port is P+1)");
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(profile), std::move(tpm), stop);
  TPMSEC_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<EmulationServer>(new EmulationServer(std::move(impl)));
}

EmulationServer::EmulationServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EmulationServer::~EmulationServer() = default;
Status EmulationServer::run() { return impl_->run(); }
std::string EmulationServer::totals() const { return impl_->totals(); }
BenchResult EmulationServer::result() const { return impl_->result(); }
EmulationServerStats EmulationServer::stats() const { return impl_->stats(); }

}  // namespace tpmsec
