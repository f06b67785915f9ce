// The Transport base class's defaults (and so its vtable): with the transports,
// not with open_transport(), which is a layer above them (docs/architecture.md).
#include "tpmsec/transport.h"

namespace tpmsec {

Status Transport::reset_tpm() { return unsupported_error(describe() + " has no platform control to reset the TPM"); }

Status Transport::suspend_resume() {
  return unsupported_error(describe() + " has no platform control to suspend and resume the TPM");
}

}  // namespace tpmsec
