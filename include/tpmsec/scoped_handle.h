// RAII for TPM objects and sessions: a loaded handle is flushed when its
// owner lets go of it, on every path, unless release()d or forgotten.
//
// It flushes through the Tpm's handle ledger (handle_ledger.h): only a
// handle that Tpm adopted from a creating command is ever flushed, so a
// ScopedHandle around a handle taken from an unchecked response sends
// nothing.
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
  // Hands the handle to another owner without flushing; the Tpm still owns
  // it, so the new owner must flush or forget it.
  uint32_t release() {
    uint32_t h = handle_;
    handle_ = 0;
    return h;
  }
  // The TPM no longer has the handle (an authenticated response said it
  // ended it, or it was reset away): stop owning it without a FlushContext.
  uint32_t forget();
  // FlushContext now, through Tpm::flush; a handle the TPM no longer knows
  // counts as flushed.
  Status flush();

 private:
  Tpm* tpm_ = nullptr;
  uint32_t handle_ = 0;
};

}  // namespace tpmsec

#endif  // TPMSEC_SCOPED_HANDLE_H_
