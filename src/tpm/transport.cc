// The Transport base class's defaults (and so its vtable and typeinfo): in the
// core, whose contract transport.h is. Every layer that holds a Transport&
// (the policy decision's facts too) then finds them below it, also where
// UBSan's vptr check references the typeinfo (docs/architecture.md).
#include "tpmsec/transport.h"

namespace tpmsec {

Status Transport::reset_tpm() { return unsupported_error(describe() + " has no platform control to reset the TPM"); }

Status Transport::suspend_resume() {
  return unsupported_error(describe() + " has no platform control to suspend and resume the TPM");
}

}  // namespace tpmsec
