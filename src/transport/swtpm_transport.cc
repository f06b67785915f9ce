// swtpm's data channel (raw command bytes) and control channel
// (swtpm's tpm_ioctl protocol: big-endian u32 command, payload, u32 result).
#include <fmt/format.h>

#include "startup.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/transport/socket_io.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"
#include "transport_limits.h"

namespace tpmsec {
namespace {

using transport_limits::kMaxResponse;
using transport_limits::kTimeoutMs;
constexpr uint32_t kCtrlInit = 2;  // CMD_INIT in swtpm's tpm_ioctl.h

// The data channel, its reads bounded by kTimeoutMs each (read_frame).
Result<io::Fd> connect_data(const SwtpmAddress& address) {
  TPMSEC_ASSIGN_OR_RETURN(io::Fd fd, !address.path.empty() ? io::connect_unix(address.path, "swtpm")
                                                           : io::connect_tcp(address.host, address.port, "swtpm"));
  TPMSEC_RETURN_IF_ERROR(io::set_receive_timeout(fd.get(), kTimeoutMs, "swtpm"));
  return fd;
}

class SwtpmTransport final : public Transport {
 public:
  SwtpmTransport(SwtpmAddress address, io::Fd data) : address_(std::move(address)), data_(std::move(data)) {}

  // A failed exchange leaves the stream's framing unknown, so the connection
  // is dropped; the next command opens a new one (swtpm then serves us
  // again). That is what lets the caller find and flush what the TPM created
  // for a command whose response was lost with the connection: swtpm, unlike
  // the kernel's /dev/tpmrm0, flushes nothing when a client goes away.
  // With handles=private it does (tpmsec emulate --private-handles): the
  // handles this connection created are gone with it, and their numbers may
  // be another client's by now, so the connection is not reopened and every
  // later command, flushes included, fails: nothing of anyone else's can be
  // flushed under a stale handle.
  Result<Bytes> transmit(ByteView command) override {
    if (!data_.valid()) {
      if (address_.private_handles) {
        return runtime_error(describe() +
                             ": the connection was lost; with handles=private the server flushed its "
                             "handles, so it is not reopened");
      }
      TPMSEC_ASSIGN_OR_RETURN(data_, connect_data(address_));
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

  // _TPM_Init through the control channel (CMD_INIT), then Startup(startup_type).
  Status power_cycle(uint16_t startup_type) {
    if (address_.ctrl_port == 0 && address_.ctrl_path.empty()) {
      return unsupported_error(describe() + " has no control channel: add ctrl=PORT or ctrlpath=SOCKET");
    }
    io::Fd ctrl;
    if (!address_.ctrl_path.empty()) {
      TPMSEC_ASSIGN_OR_RETURN(ctrl, io::connect_unix(address_.ctrl_path, "swtpm control channel"));
    } else {
      const std::string& host = address_.ctrl_host.empty() ? address_.host : address_.ctrl_host;
      TPMSEC_ASSIGN_OR_RETURN(ctrl, io::connect_tcp(host, address_.ctrl_port, "swtpm control channel"));
    }
    Writer w;
    w.u32(kCtrlInit);
    w.u32(0);  // init flags: keep volatile state file handling default
    TPMSEC_ASSIGN_OR_RETURN(Bytes init, w.finish());
    TPMSEC_RETURN_IF_ERROR(io::write_all(ctrl.get(), init, "swtpm control channel"));
    uint8_t result[4];
    TPMSEC_RETURN_IF_ERROR(io::read_exact(ctrl.get(), result, kTimeoutMs, "swtpm control channel"));
    if (load_be32(result) != 0) {
      return runtime_error(fmt::format("swtpm control channel refused CMD_INIT (0x{:x})", load_be32(result)));
    }
    // swtpm started with startup-clear sends Startup(CLEAR) itself; otherwise we do.
    TPMSEC_ASSIGN_OR_RETURN(uint32_t code, send_startup(*this, startup_type));
    if (code == rc::kInitialize && startup_type == su::kState) {
      return runtime_error(
          "swtpm ran Startup(CLEAR) itself after _TPM_Init (started with --flags startup-clear), so "
          "the TPM cannot resume");
    }
    if (code != rc::kSuccess && code != rc::kInitialize) {
      return runtime_error("Startup after _TPM_Init failed: " + describe_rc(code));
    }
    return ok_status();
  }

  // Asserted by the user (handles=private), as for `tpmsec emulate
  // --private-handles`: a plain swtpm flushes nothing when a client closes.
  bool private_handles() const override { return address_.private_handles; }

  // The TPM's name, also the key of its state files (pins, session cache):
  // handles=private says how the server treats connections, not which TPM
  // it is, so it is left out; a transport reopened from this string lists
  // handles as on a shared TPM, which is always safe.
  std::string describe() const override { return tpm_string_of(address_); }

 private:
  Result<Bytes> exchange(ByteView command) {
    const std::string what = "swtpm";
    TPMSEC_RETURN_IF_ERROR(io::write_all(data_.get(), command, what));
    return io::read_frame(data_.get(), kMaxResponse, what);
  }

  SwtpmAddress address_;
  io::Fd data_;
};

}  // namespace

Result<std::unique_ptr<Transport>> open_swtpm(const SwtpmAddress& address) {
  TPMSEC_ASSIGN_OR_RETURN(io::Fd fd, connect_data(address));
  return std::unique_ptr<Transport>(std::make_unique<SwtpmTransport>(address, std::move(fd)));
}

}  // namespace tpmsec
