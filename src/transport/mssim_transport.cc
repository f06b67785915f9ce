// The Microsoft simulator's protocol (mssim_protocol.h): framed commands on
// the TPM port, platform signals on the port after it.
#include <fmt/format.h>

#include "startup.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/transport/mssim_protocol.h"
#include "tpmsec/transport/socket_io.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"
#include "transport_limits.h"

namespace tpmsec {
namespace {

using transport_limits::kMaxResponse;
using transport_limits::kTimeoutMs;

class MssimTransport final : public Transport {
 public:
  MssimTransport(MssimAddress address, io::Fd data) : address_(std::move(address)), data_(std::move(data)) {}
  MssimTransport(const MssimTransport&) = delete;
  MssimTransport& operator=(const MssimTransport&) = delete;

  ~MssimTransport() override {
    // TPM_SESSION_END: the server closes this connection and serves the next.
    if (data_.valid()) (void)send_u32(data_.get(), mssim::kSessionEnd, "mssim TPM port");
  }

  // As swtpm's: a failed exchange leaves the framing unknown, so the
  // connection is dropped and the next command opens a new one.
  // With handles=private, as swtpm's: a lost connection took its handles
  // with it, so it is not reopened (swtpm_transport.cc says why).
  Result<Bytes> transmit(ByteView command) override {
    if (!data_.valid()) {
      if (address_.private_handles) {
        return runtime_error(describe() +
                             ": the connection was lost; with handles=private the server flushed its "
                             "handles, so it is not reopened");
      }
      TPMSEC_ASSIGN_OR_RETURN(data_, io::connect_tcp(address_.host, address_.port, "mssim"));
    }
    auto response = exchange(command);
    if (!response.ok()) data_ = io::Fd();
    return response;
  }

  Status reset_tpm() override { return power_cycle(su::kClear); }

  Status suspend_resume() override {
    TPMSEC_RETURN_IF_ERROR(shutdown_state(*this));
    return power_cycle(su::kState);
  }

  std::string describe() const override { return tpm_string_of(address_); }
  bool private_handles() const override { return address_.private_handles; }

  // Power on and NV on (no-ops for a simulator already on), then Startup(CLEAR)
  // unless the TPM is started already.
  Status power_on() {
    TPMSEC_RETURN_IF_ERROR(signal({mssim::kPowerOn, mssim::kNvOn}));
    TPMSEC_ASSIGN_OR_RETURN(uint32_t code, send_startup(*this, su::kClear));
    if (code != rc::kSuccess && code != rc::kInitialize) {
      return runtime_error(describe() + ": Startup(CLEAR) failed: " + describe_rc(code));
    }
    return ok_status();
  }

 private:
  static Status send_u32(int fd, uint32_t value, const std::string& what) {
    uint8_t b[4];
    store_be32(b, value);
    return io::write_all(fd, ByteView(b, 4), what);
  }

  // Signals on the platform port, each answered by u32 0; then TPM_SESSION_END.
  Status signal(std::initializer_list<uint32_t> codes) {
    const std::string what = "mssim platform port";
    TPMSEC_ASSIGN_OR_RETURN(io::Fd fd, io::connect_tcp(address_.host, static_cast<uint16_t>(address_.port + 1), what));
    for (uint32_t code : codes) {
      TPMSEC_RETURN_IF_ERROR(send_u32(fd.get(), code, what));
      uint8_t answer[4];
      TPMSEC_RETURN_IF_ERROR(io::read_exact(fd.get(), answer, kTimeoutMs, what));
      if (load_be32(answer) != 0) {
        return runtime_error(fmt::format("{} refused signal {} ({})", what, code, load_be32(answer)));
      }
    }
    (void)send_u32(fd.get(), mssim::kSessionEnd, what);
    return ok_status();
  }

  // _TPM_Init (TPM_SIGNAL_RESET), then Startup(startup_type).
  Status power_cycle(uint16_t startup_type) {
    TPMSEC_RETURN_IF_ERROR(signal({mssim::kReset}));
    TPMSEC_ASSIGN_OR_RETURN(uint32_t code, send_startup(*this, startup_type));
    if (code != rc::kSuccess) return runtime_error("Startup after _TPM_Init failed: " + describe_rc(code));
    return ok_status();
  }

  Result<Bytes> exchange(ByteView command) {
    const std::string what = "mssim";
    if (command.size() > kMaxResponse) return usage_error("command too large for the mssim transport");
    Writer w;
    w.u32(mssim::kSendCommand);
    w.u8(0);  // locality 0
    w.u32(static_cast<uint32_t>(command.size()));
    w.bytes(command);
    TPMSEC_ASSIGN_OR_RETURN(Bytes frame, w.finish());
    TPMSEC_RETURN_IF_ERROR(io::write_all(data_.get(), frame, what));
    uint8_t size_be[4];
    TPMSEC_RETURN_IF_ERROR(io::read_exact(data_.get(), size_be, kTimeoutMs, what));
    uint32_t size = load_be32(size_be);
    if (size < kFrameHeaderBytes || size > kMaxResponse) {
      return parse_error(fmt::format("mssim server sent a response of size {}", size));
    }
    Bytes response(size);
    TPMSEC_RETURN_IF_ERROR(io::read_exact(data_.get(), response, kTimeoutMs, what));
    const uint32_t framed = read_frame_header(response, kMaxResponse).header.size;
    if (framed != size) {
      return parse_error(
          fmt::format("mssim server framed {} bytes around a response whose header says {}", size, framed));
    }
    uint8_t ack[4];
    TPMSEC_RETURN_IF_ERROR(io::read_exact(data_.get(), ack, kTimeoutMs, what));
    if (load_be32(ack) != 0) return parse_error(fmt::format("mssim server ended a response with {}", load_be32(ack)));
    return response;
  }

  MssimAddress address_;
  io::Fd data_;
};

}  // namespace

Result<std::unique_ptr<Transport>> open_mssim(const MssimAddress& address) {
  if (address.port == 65535) return usage_error("mssim: port=65535 leaves no platform port (port + 1)");
  TPMSEC_ASSIGN_OR_RETURN(io::Fd fd, io::connect_tcp(address.host, address.port, "mssim"));
  auto t = std::make_unique<MssimTransport>(address, std::move(fd));
  TPMSEC_RETURN_IF_ERROR(t->power_on());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace tpmsec
