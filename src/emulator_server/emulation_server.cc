// The server's loop (tpmsec-server/emulator_server/emulation_server.h): the
// server layer (tpmsec-server/resource_manager/server.h) serves the chip on two TCP ports,
// its poll loop, connections, FIFO and, with private handles, a handle
// space per data connection; what is the emulator's own is here: the chip
// behind a Transport (commands at the locality the clients chose), and the
// emulated platform's channels as server protocols. With a Unix control
// socket (qemu's tpm-emulator backend) the control channel is served on a
// thread of its own and its data channels are handed to the server layer
// (Server::connect()); the chip is then guarded by one mutex.
#include "tpmsec-server/emulator_server/emulation_server.h"

#include <fmt/format.h>

#include <mutex>
#include <thread>

#include "emulator_server/channel.h"
#include "emulator_server/emulated_chip.h"
#include "emulator_server/unix_control.h"
#include "tpmsec-server/resource_manager/log_priority.h"
#include "tpmsec-server/resource_manager/server.h"
#include "tpmsec-server/socket_front/socket_front.h"

namespace tpmsec {

using emulation::Channel;

class EmulationServer::Impl {
 public:
  Impl(EmulationServerOptions options, LatencyProfile profile, std::unique_ptr<Transport> tpm,
       const std::atomic<bool>* stop)
      : o_(std::move(options)),
        stop_(stop),
        chip_(o_, std::move(profile), std::move(tpm), stop, [this](const std::string& l) { log(l); }),
        chip_tpm_(*this),
        data_(mssim() ? std::shared_ptr<const server::Protocol>(
                            std::make_shared<ChannelProtocol>(*this, emulation::mssim_tpm_channel()))
                      : server::raw_tpm_protocol()),
        ctrl_(std::make_shared<ChannelProtocol>(
            *this, mssim() ? emulation::mssim_platform_channel() : emulation::swtpm_control_channel())) {}

  Status start() {
    TPMSEC_RETURN_IF_ERROR(chip_.start());
    server::ServerOptions options;
    options.isolate = o_.private_handles;
    options.max_clients = o_.max_clients;
    options.log = [this](const std::string& l) { log(l); };
    // The TPM's command list is the driver's bookkeeping: read unbilled.
    options.attributes_from = &chip_.unbilled();
    TPMSEC_ASSIGN_OR_RETURN(server_, server::Server::create(chip_tpm_, std::move(options)));
    if (!o_.ctrl_unix.empty()) return start_unix();
    TPMSEC_RETURN_IF_ERROR(socket_front::listen_tcp(*server_, o_.host, o_.port, data_, "data port", limits()));
    TPMSEC_RETURN_IF_ERROR(socket_front::listen_tcp(*server_, o_.host, static_cast<uint16_t>(o_.port + 1), ctrl_,
                                                    mssim() ? "platform port" : "control port", limits()));
    const LatencyProfile& p = chip_.profile();
    fmt::print(
        stderr, "tpmsec emulate: {} ({}) on {}:{} (data) and {}:{} ({}), {} protocol, {} clock{}{}\n", p.id, p.name,
        o_.host, o_.port, o_.host, o_.port + 1, mssim() ? "platform" : "control", protocol_name(), clock_name(),
        o_.means ? ", at the profile's means" : "",
        o_.private_handles ? ", private handles (each client a handle space of its own, flushed when it closes)" : "");
    return ok_status();
  }

  Status start_unix() {
    TPMSEC_ASSIGN_OR_RETURN(unix_ctrl_, emulation::UnixControl::bind(o_.ctrl_unix, o_.frame_timeout_ms,
                                                                     [this](const std::string& l) { log(l); }));
    unix_channel_ = emulation::swtpm_control_channel(emulation::ControlFraming::kStructs);
    const LatencyProfile& p = chip_.profile();
    fmt::print(stderr,
               "tpmsec emulate: {} ({}) on control socket {} (swtpm --ctrl type=unixio; data channel by "
               "CMD_SET_DATAFD), {} clock{}\n",
               p.id, p.name, o_.ctrl_unix, clock_name(), o_.means ? ", at the profile's means" : "");
    return ok_status();
  }

  Status run() {
    if (!unix_ctrl_) return server_->run(*stop_);
    loop_stop_ = false;
    std::thread control([this] {
      unix_ctrl_->serve([this] { return stopping(); }, *unix_channel_,
                        [this](ByteView request, UniqueFd& fd) { return serve_control(request, fd); });
    });
    Status served = server_->run(loop_stop_);
    loop_stop_ = true;  // also when the loop failed: the control thread ends within 200 ms
    control.join();
    return served;
  }

  std::string totals() const { return chip_.served().totals(clock_name()); }

  BenchResult result() const {
    return chip_.served().result(
        chip_.identity(), o_.ctrl_unix.empty()
                              ? fmt::format("tpmsec emulate {} ({}:{}, {} protocol, {} clock)", chip_.profile().id,
                                            o_.host, o_.port, protocol_name(), clock_name())
                              : fmt::format("tpmsec emulate {} (control socket, swtpm protocol, {} clock)",
                                            chip_.profile().id, clock_name()));
  }

  EmulationServerStats stats() const {
    const server::ServerStats s = server_->stats();
    EmulationServerStats out;
    out.commands = chip_.served().commands();
    out.records = chip_.served().records();
    out.variants = chip_.served().variants();
    out.clients = s.clients;
    out.handle_entries = s.handle_entries;
    out.dropped = s.dropped;
    return out;
  }

 private:
  // The chip as the server layer's TPM: every command at the locality the
  // clients chose (CMD_SET_LOCALITY's, or an mssim command's own).
  class ChipTransport final : public Transport {
   public:
    explicit ChipTransport(Impl& s) : s_(s) {}
    Result<Bytes> transmit(ByteView command) override {
      std::lock_guard<std::mutex> lock(s_.chip_mu_);
      return s_.chip_.execute(command, s_.command_locality_ ? *s_.command_locality_ : s_.locality_);
    }
    std::string describe() const override { return "emulated chip"; }

   private:
    Impl& s_;
  };

  // What a channel may do for one client: its TPM commands through the
  // client's server port (its handle space), the platform's signals here.
  class Port final : public emulation::ChipPort {
   public:
    Port(Impl& s, server::ClientPort& port) : s_(s), port_(port) {}
    Bytes execute(ByteView command) override { return port_.execute(command); }
    Bytes execute_at(ByteView command, uint8_t locality) override {
      s_.command_locality_ = locality;
      Bytes response = port_.execute(command);
      s_.command_locality_.reset();
      return response;
    }
    Status tpm_init(bool delete_volatile) override { return s_.platform_init(delete_volatile); }
    void power_off() override { s_.platform_off(); }
    bool powered() const override { return s_.platform_powered(); }
    void set_locality(uint8_t locality) override { s_.platform_locality(locality); }
    void stop_serving() override { port_.stop_serving(); }
    void log(const std::string& line) override { port_.log(line); }

   private:
    Impl& s_;
    server::ClientPort& port_;
  };

  // The Unix control channel's requests (on its thread): the platform's
  // signals under the chip's mutex, CMD_SET_DATAFD's descriptor a client
  // of the server layer.
  class UnixPort final : public emulation::ChipPort {
   public:
    UnixPort(Impl& s, UniqueFd& fd) : s_(s), fd_(fd) {}
    Bytes execute(ByteView command) override { return execute_at(command, s_.locality_); }
    Bytes execute_at(ByteView command, uint8_t locality) override {
      std::lock_guard<std::mutex> lock(s_.chip_mu_);
      return s_.chip_.execute(command, locality);
    }
    Status tpm_init(bool delete_volatile) override { return s_.platform_init(delete_volatile); }
    void power_off() override { s_.platform_off(); }
    bool powered() const override { return s_.platform_powered(); }
    void set_locality(uint8_t locality) override { s_.platform_locality(locality); }
    void stop_serving() override { s_.loop_stop_ = true; }
    void log(const std::string& line) override { s_.log(line); }
    bool attach_data_channel() override {
      if (!fd_.valid()) return false;
      server::ClientConnection c;
      c.peer = socket_front::peer_identity(fd_.get());
      c.socket = std::move(fd_);
      c.limits = s_.limits();
      c.front = "the data channel";
      auto id = s_.server_->connect(std::move(c));
      if (!id.ok()) s_.log("control: CMD_SET_DATAFD: " + id.error().message());
      return id.ok();
    }

   private:
    Impl& s_;
    UniqueFd& fd_;
  };

  server::Served serve_control(ByteView request, UniqueFd& fd) {
    UnixPort port(*this, fd);
    return unix_channel_->serve(request, port);
  }
  bool stopping() {
    if (stop_->load()) loop_stop_ = true;
    return loop_stop_.load();
  }
  Status platform_init(bool delete_volatile) {
    std::lock_guard<std::mutex> lock(chip_mu_);
    return chip_.platform().tpm_init(delete_volatile);
  }
  void platform_off() {
    std::lock_guard<std::mutex> lock(chip_mu_);
    chip_.platform().power_off();
  }
  bool platform_powered() {
    std::lock_guard<std::mutex> lock(chip_mu_);
    return chip_.platform().powered();
  }
  void platform_locality(uint8_t locality) {
    std::lock_guard<std::mutex> lock(chip_mu_);
    locality_ = locality;
  }

  // An emulated platform's channel as a protocol of the server layer.
  class ChannelProtocol final : public server::Protocol {
   public:
    ChannelProtocol(Impl& s, std::unique_ptr<Channel> channel) : s_(s), channel_(std::move(channel)) {}
    server::Parse parse(ByteView buffered, size_t) const override { return channel_->parse(buffered); }
    server::Parse truncated(ByteView buffered) const override { return channel_->truncated(buffered); }
    server::Served serve(ByteView request, server::ClientPort& port) const override {
      Port chip(s_, port);
      return channel_->serve(request, chip);
    }
    bool carries_commands() const override { return channel_->carries_commands(); }

   private:
    Impl& s_;
    std::unique_ptr<Channel> channel_;
  };

  bool mssim() const { return o_.protocol == ServerProtocol::kMssim; }
  server::ClientLimits limits() const {
    server::ClientLimits l;
    l.frame_timeout_ms = o_.frame_timeout_ms;
    return l;
  }
  std::string protocol_name() const { return mssim() ? "mssim" : "swtpm"; }
  std::string clock_name() const { return o_.real_clock ? "real" : "virtual"; }

  void log(const std::string& line) const {
    if (!o_.quiet) fmt::print(stderr, "tpmsec emulate: {}\n", server::split_priority(line).text);
  }

  EmulationServerOptions o_;
  const std::atomic<bool>* stop_;
  std::mutex chip_mu_;  // the chip, locality_: the server's loop and the Unix control thread
  emulation::EmulatedChip chip_;
  ChipTransport chip_tpm_;
  std::shared_ptr<const server::Protocol> data_;
  std::shared_ptr<const server::Protocol> ctrl_;
  uint8_t locality_ = 0;                               // CMD_SET_LOCALITY's, for the swtpm data channel
  std::optional<uint8_t> command_locality_;            // an mssim command's own
  std::unique_ptr<emulation::UnixControl> unix_ctrl_;  // --ctrl-unix: the control socket
  std::unique_ptr<Channel> unix_channel_;
  std::atomic<bool> loop_stop_{false};      // --ctrl-unix: ends the loop (a stop, CMD_SHUTDOWN)
  std::unique_ptr<server::Server> server_;  // last: closed (its clients' handles flushed) before the chip goes
};

Result<std::unique_ptr<EmulationServer>> EmulationServer::start(EmulationServerOptions options, LatencyProfile profile,
                                                                std::unique_ptr<Transport> tpm,
                                                                const std::atomic<bool>* stop) {
  if (!options.ctrl_unix.empty()) {
    if (options.port != 0) return usage_error("emulate: --port and --ctrl-unix exclude each other");
    if (options.protocol != ServerProtocol::kSwtpm) return usage_error("emulate: --ctrl-unix speaks swtpm's protocol");
  } else if (options.port == 0 || options.port == 65535) {
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
