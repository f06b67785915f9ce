#include "tpmsec/scoped_handle.h"

namespace tpmsec {

Status ScopedHandle::flush() {
  if (!handle_ || !tpm_) return ok_status();
  uint32_t h = release();
  auto r = tpm_->run(cmd::FlushContext{h});
  if (!r.ok()) {
    // TPM_RC_HANDLE / TPM_RC_VALUE: already gone (a reset, or flushed by the TPM).
    uint32_t base = rc_base(r.error().tpm_rc());
    if (r.error().kind() == ErrorKind::kTpm && (base == rc::kHandle || base == rc::kValue)) return ok_status();
    return r.error();
  }
  return ok_status();
}

}  // namespace tpmsec
