#include "testing/transport_doubles.h"

#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec::testing {

void ScriptedTransport::always(Bytes response) {
  respond_with([response = std::move(response)](ByteView) -> Result<Bytes> { return response; });
}

Result<Bytes> ScriptedTransport::transmit(ByteView command) {
  if (recording_) sent_.emplace_back(command.begin(), command.end());
  if (!queue_.empty()) {
    Bytes r = std::move(queue_.front());
    queue_.pop_front();
    return r;
  }
  if (responder_) return responder_(command);
  return runtime_error(name_ + ": no more responses");
}

Result<Bytes> RecordingTransport::transmit(ByteView command) {
  codes_.push_back(command_code_of(command));
  Result<Bytes> r = inner_->transmit(command);
  if (observe_) observe_(command, r);
  return r;
}

uint32_t command_code_of(ByteView command) {
  HeaderRead hr = read_frame_header(command, command.size());
  return hr.check == FrameCheck::kIncomplete ? 0 : hr.header.code;
}

bool succeeded(const Result<Bytes>& response) {
  if (!response.ok()) return false;
  HeaderRead hr = read_frame_header(*response, response->size());
  return hr.check != FrameCheck::kIncomplete && hr.header.code == rc::kSuccess;
}

}  // namespace tpmsec::testing
