// The commands a resource manager sends on its own (ContextSave,
// ContextLoad, FlushContext), framed and their answers read by the core's
// frame codec (command_frame.h, response_frame.h) within the frame's own
// bounds: every answer is hostile input.
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_TPM_CALLS_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_TPM_CALLS_H_

#include <cstdint>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/response_code.h"
#include "tpmsec/transport.h"

namespace tpmsec::server {

// A NO_SESSIONS command `code` with `parameters`; the TPM's answer, or a bare
// TPM_RC_FAILURE frame when the transport failed.
Bytes send_plain(Transport& tpm, uint32_t code, ByteView parameters);

// The response code of a whole response frame; TPM_RC_FAILURE for anything
// that is not one.
uint32_t response_code(ByteView response);

// The first handle of a successful response that carries one (a response
// handle area), else 0.
uint32_t response_handle(ByteView response);

struct Saved {
  uint32_t rc = 0;
  Bytes context;  // the TPMS_CONTEXT, when rc is 0
};
// A context whose savedHandle is not the one `handle` saves as (a session:
// its own handle; an object: a transient handle, Part 2 §14.6) is a forged
// answer: TPM_RC_FAILURE, nothing kept.
Saved context_save(Transport& tpm, uint32_t handle);
struct Loaded {
  uint32_t rc = 0;
  uint32_t handle = 0;  // when rc is 0
};
Loaded context_load(Transport& tpm, ByteView context);
uint32_t flush_context(Transport& tpm, uint32_t handle);

// The resource manager's way to the TPM: at most `limit` commands between
// two renew()s (one client command and what the manager does for it), then
// a bare TPM_RC_FAILURE answer without sending. Every answer is unauthenticated,
// so no chain of them (a forged TPM_RC_CONTEXT_GAP, SESSION_MEMORY,
// OBJECT_MEMORY, a listing, a success) makes the manager work without end.
class CommandBudget final : public TransportDecorator {
 public:
  static constexpr int kDefaultLimit = 1024;
  explicit CommandBudget(Transport& tpm, int limit = kDefaultLimit)
      : TransportDecorator(tpm, Traffic::kObserves), limit_(limit), left_(limit) {}

  Result<Bytes> transmit(ByteView command) override;
  // The manager's own commands: nothing between them and the TPM keeps
  // their handles apart.
  bool private_handles() const override { return false; }

  void renew() { left_ = limit_; }
  bool spent() const { return left_ <= 0; }

 private:
  int limit_;
  int left_;
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_TPM_CALLS_H_
