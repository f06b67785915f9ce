#include "emulator_server/platform_transport.h"

#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec::emulation {

Result<Bytes> PlatformTransport::transmit(ByteView command) {
  if (!powered_) {
    log_("libtpms: the TPM is powered off");
    return error_frame(rc::kFailure);
  }
  (void)embedded_set_locality(embedded_, locality_);
  auto response = embedded_.transmit(command);
  if (response.ok()) return response;
  log_("libtpms: " + response.error().message());
  return error_frame(rc::kFailure);
}

Status PlatformTransport::tpm_init(bool delete_volatile) {
  Status s = embedded_tpm_init(embedded_, delete_volatile);
  powered_ = s.ok();
  return s;
}

void PlatformTransport::power_off() {
  (void)embedded_power_off(embedded_);
  powered_ = false;
}

}  // namespace tpmsec::emulation
