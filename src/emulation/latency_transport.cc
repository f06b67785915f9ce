// The transport decorator that replaces a TPM's real latency with the
// modelled one on a VirtualClock.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "tpmsec/emulation/latency_transport.h"
#include "tpmsec/emulation/slot_limits.h"

namespace tpmsec {
namespace {
constexpr int64_t kPaceSliceNs = 50'000'000;  // a stop is noticed within 50 ms
}  // namespace

LatencyTransport::LatencyTransport(Transport& inner, LatencyModel model, VirtualClock& clock)
    : TransportDecorator(inner, Traffic::kObserves),
      slots_(std::make_unique<SlotLimitTransport>(inner, model.profile().slots)),
      model_(std::move(model)),
      clock_(clock) {}

LatencyTransport::~LatencyTransport() = default;

Status LatencyTransport::reset_tpm() { return slots_->reset_tpm(); }
Status LatencyTransport::suspend_resume() { return slots_->suspend_resume(); }

Result<Bytes> LatencyTransport::transmit(ByteView command) {
  SteadyClock real;
  int64_t start = real.now_ns();
  auto response = slots_->transmit(command);
  int64_t spent = real.now_ns() - start;
  if (!response.ok()) return response;  // no TPM answer: nothing to model

  CommandShape shape = shape_of(command, *response);
  ModelledLatency m = model_.model(shape);
  auto modelled = static_cast<int64_t>(std::llround(m.total_ms * 1e6));
  if (paced_) {
    // Wait out what the TPM did not take, in slices short enough for a stop
    // to be noticed; the wait then counts as TPM time replaced.
    for (;;) {
      int64_t left = modelled - (real.now_ns() - start);
      if (left <= 0 || (cut_short_ && cut_short_->load())) break;
      std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(left, kPaceSliceNs)));
    }
    spent = real.now_ns() - start;
  }
  clock_.adjust(modelled - spent);
  ++commands_;
  modelled_ns_ += modelled;
  last_ = std::move(m);
  return response;
}

std::string LatencyTransport::describe() const { return inner().describe() + " emulating " + model_.profile().id; }

}  // namespace tpmsec
