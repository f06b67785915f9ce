#include "server/tpm_calls.h"

#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wire.h"

namespace tpmsec::server {

Bytes send_plain(Transport& tpm, uint32_t code, ByteView parameters) {
  Writer w(kMaxCommandBytes, "command");
  w.u16(st::kNoSessions);
  auto size = w.begin_total_size32("commandSize");
  w.u32(code);
  w.bytes(parameters, "parameters");
  w.end_size(size);
  auto command = w.finish();
  if (!command.ok()) return error_frame(rc::kFailure);
  auto response = tpm.transmit(*command);
  if (!response.ok()) return error_frame(rc::kFailure);
  return std::move(*response);
}

uint32_t response_code(ByteView response) {
  HeaderRead h = read_frame_header(response, SIZE_MAX);
  if (h.check != FrameCheck::kOk || h.header.size != response.size()) return rc::kFailure;
  return h.header.code;
}

uint32_t response_handle(ByteView response) {
  auto handles = read_response_handles(response, 1, response.size());
  return handles.ok() ? handles->front() : 0;
}

Saved context_save(Transport& tpm, uint32_t handle) {
  Bytes response = send_plain(tpm, cmd::ContextSave::kInfo.code, be32(handle));
  Saved out{response_code(response), {}};
  if (out.rc != rc::kSuccess) return out;
  ByteView body = ByteView(response).subspan(kFrameHeaderBytes);
  const uint32_t saved = saved_handle_of(body);
  const bool object = (handle >> 24) == ht::kTransient;
  if (saved == 0 || (object ? (saved >> 24) != ht::kTransient : saved != handle)) return {rc::kFailure, {}};
  out.context.assign(body.begin(), body.end());
  return out;
}

Loaded context_load(Transport& tpm, ByteView context) {
  Bytes response = send_plain(tpm, cmd::ContextLoad::kInfo.code, context);
  Loaded out{response_code(response), 0};
  if (out.rc != rc::kSuccess) return out;
  out.handle = response_handle(response);
  if (out.handle == 0) out.rc = rc::kFailure;
  return out;
}

uint32_t flush_context(Transport& tpm, uint32_t handle) {
  return response_code(send_plain(tpm, cmd::FlushContext::kInfo.code, be32(handle)));
}

uint32_t saved_handle_of(ByteView context) {
  Reader r(context);
  r.u64("sequence");
  uint32_t handle = r.u32("savedHandle");
  r.u32("hierarchy");
  r.tpm2b("contextBlob");
  if (!r.ok() || r.remaining() != 0) return 0;
  return handle;
}

Result<Bytes> CommandBudget::transmit(ByteView command) {
  if (left_ <= 0) return error_frame(rc::kFailure);
  --left_;
  return tpm_.transmit(command);
}

}  // namespace tpmsec::server
