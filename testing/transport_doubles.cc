#include "testing/transport_doubles.h"

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

uint32_t command_code_of(ByteView command) { return command.size() >= 10 ? load_be32(command.data() + 6) : 0; }

bool succeeded(const Result<Bytes>& response) {
  return response.ok() && response->size() >= 10 && load_be32(response->data() + 6) == 0;
}

}  // namespace tpmsec::testing
