#include "startup.h"

#include "tpmsec/commands.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// Startup and Shutdown share a layout: a header without sessions, then a TPM_SU.
Result<uint32_t> send_su(Transport& transport, uint32_t command_code, uint16_t type) {
  Writer w;
  w.u16(st::kNoSessions);
  w.u32(12);
  w.u32(command_code);
  w.u16(type);
  TPMSEC_ASSIGN_OR_RETURN(Bytes command, w.finish());
  TPMSEC_ASSIGN_OR_RETURN(Bytes rsp, transport.transmit(command));
  Reader r(rsp);
  r.u16("tag");
  r.u32("size");
  uint32_t code = r.u32("response code");
  TPMSEC_RETURN_IF_ERROR(r.status());
  return code;
}

}  // namespace

Result<uint32_t> send_startup(Transport& transport, uint16_t startup_type) {
  return send_su(transport, cmd::Startup::kInfo.code, startup_type);
}

Result<uint32_t> send_shutdown(Transport& transport, uint16_t shutdown_type) {
  return send_su(transport, cmd::Shutdown::kInfo.code, shutdown_type);
}

Status shutdown_state(Transport& transport) {
  TPMSEC_ASSIGN_OR_RETURN(uint32_t code, send_shutdown(transport, su::kState));
  if (code != rc::kSuccess) return runtime_error("Shutdown(STATE) failed: " + describe_rc(code));
  return ok_status();
}

}  // namespace tpmsec
