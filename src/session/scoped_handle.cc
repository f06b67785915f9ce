#include "tpmsec/scoped_handle.h"

namespace tpmsec {

uint32_t ScopedHandle::forget() {
  uint32_t h = release();
  if (h && tpm_) tpm_->forget(h);
  return h;
}

Status ScopedHandle::flush() {
  if (!handle_ || !tpm_) return ok_status();
  return tpm_->flush(release());
}

}  // namespace tpmsec
