// The transport decorator that replaces a TPM's real latency with the
// modelled one on a VirtualClock.
#include <cmath>

#include "tpmsec/latency_model.h"

namespace tpmsec {

Result<Bytes> LatencyTransport::transmit(ByteView command) {
  SteadyClock real;
  int64_t start = real.now_ns();
  auto response = inner_.transmit(command);
  int64_t spent = real.now_ns() - start;
  if (!response.ok()) return response;  // no TPM answer: nothing to model

  CommandShape shape = shape_of(command, *response);
  ModelledLatency m = model_.model(shape);
  auto modelled = static_cast<int64_t>(std::llround(m.total_ms * 1e6));
  clock_.adjust(modelled - spent);
  ++commands_;
  modelled_ns_ += modelled;
  real_ns_ += spent;
  last_ = std::move(m);
  return response;
}

std::string LatencyTransport::describe() const {
  return inner_.describe() + " emulating " + model_.profile().id;
}

}  // namespace tpmsec
