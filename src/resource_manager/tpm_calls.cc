#include "resource_manager/tpm_calls.h"

#include "tpmsec/command_frame.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wire.h"

namespace tpmsec::server {

Bytes send_plain(Transport& tpm, uint32_t code, ByteView parameters) {
  auto command = write_command_frame(code, {}, {}, parameters, kMaxCommandBytes);
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
  auto areas = read_response_areas(response, 0, response.size());
  const uint32_t saved = areas.ok() ? whole_context_saved_handle(areas->parameters) : 0;
  const bool object = (handle >> 24) == ht::kTransient;
  if (saved == 0 || !areas->sessions.empty() || (object ? (saved >> 24) != ht::kTransient : saved != handle)) {
    return {rc::kFailure, {}};
  }
  out.context.assign(areas->parameters.begin(), areas->parameters.end());
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

Result<Bytes> CommandBudget::transmit(ByteView command) {
  if (left_ <= 0) return error_frame(rc::kFailure);
  --left_;
  return inner().transmit(command);
}

}  // namespace tpmsec::server
