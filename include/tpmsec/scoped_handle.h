// RAII for TPM objects and sessions: a loaded handle is flushed when its
// owner lets go of it, on every path, unless release()d or already gone.
#ifndef TPMSEC_SCOPED_HANDLE_H_
#define TPMSEC_SCOPED_HANDLE_H_

#include <cstdint>

#include "tpmsec/tpm.h"

namespace tpmsec {

class ScopedHandle {
 public:
  ScopedHandle() = default;
  ScopedHandle(Tpm& tpm, uint32_t handle) : tpm_(&tpm), handle_(handle) {}
  ScopedHandle(ScopedHandle&& o) noexcept : tpm_(o.tpm_), handle_(o.release()) {}
  ScopedHandle& operator=(ScopedHandle&& o) noexcept {
    if (this != &o) {
      (void)flush();
      tpm_ = o.tpm_;
      handle_ = o.release();
    }
    return *this;
  }
  ScopedHandle(const ScopedHandle&) = delete;
  ScopedHandle& operator=(const ScopedHandle&) = delete;
  ~ScopedHandle() { (void)flush(); }

  uint32_t get() const { return handle_; }
  explicit operator bool() const { return handle_ != 0; }
  // Gives up ownership without flushing (the TPM flushed it, or it was context-saved).
  uint32_t release() {
    uint32_t h = handle_;
    handle_ = 0;
    return h;
  }
  // FlushContext now; a handle the TPM no longer knows counts as flushed.
  Status flush();

 private:
  Tpm* tpm_ = nullptr;
  uint32_t handle_ = 0;
};

}  // namespace tpmsec

#endif  // TPMSEC_SCOPED_HANDLE_H_
