// The commands a resource manager sends on its own (ContextSave,
// ContextLoad, FlushContext), framed with the core's Writer and their
// answers read within the frame's own bounds: every answer is hostile input.
#ifndef TPMSEC_SRC_SERVER_TPM_CALLS_H_
#define TPMSEC_SRC_SERVER_TPM_CALLS_H_

#include <cstdint>

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
Saved context_save(Transport& tpm, uint32_t handle);
struct Loaded {
  uint32_t rc = 0;
  uint32_t handle = 0;  // when rc is 0
};
Loaded context_load(Transport& tpm, ByteView context);
uint32_t flush_context(Transport& tpm, uint32_t handle);

// The savedHandle of a marshalled TPMS_CONTEXT (sequence u64, savedHandle
// u32, hierarchy u32, contextBlob TPM2B), 0 when it is not one.
uint32_t saved_handle_of(ByteView context);

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_SERVER_TPM_CALLS_H_
