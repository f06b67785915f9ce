#include "startup.h"

#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// Startup and Shutdown share a layout: no handles, no sessions, a TPM_SU.
// The answer's code is all that is read of it (startup.h).
Result<uint32_t> send_su(Transport& transport, uint32_t command_code, uint16_t type) {
  const uint8_t su[] = {static_cast<uint8_t>(type >> 8), static_cast<uint8_t>(type)};
  TPMSEC_ASSIGN_OR_RETURN(Bytes command, write_command_frame(command_code, {}, {}, su, kMaxCommandBytes));
  TPMSEC_ASSIGN_OR_RETURN(Bytes rsp, transport.transmit(command));
  HeaderRead hr = read_frame_header(rsp, rsp.size());
  if (hr.check == FrameCheck::kIncomplete) {
    return parse_error(
        fmt::format("the answer to command 0x{:x} is {} bytes, not a response header", command_code, rsp.size()));
  }
  return hr.header.code;
}

}  // namespace

Result<uint32_t> send_startup(Transport& transport, uint16_t startup_type) {
  return send_su(transport, cc::kStartup, startup_type);
}

Result<uint32_t> send_shutdown(Transport& transport, uint16_t shutdown_type) {
  return send_su(transport, cc::kShutdown, shutdown_type);
}

Status shutdown_state(Transport& transport) {
  TPMSEC_ASSIGN_OR_RETURN(uint32_t code, send_shutdown(transport, su::kState));
  if (code != rc::kSuccess) return runtime_error("Shutdown(STATE) failed: " + describe_rc(code));
  return ok_status();
}

}  // namespace tpmsec
