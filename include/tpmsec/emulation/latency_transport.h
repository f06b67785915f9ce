// Latency emulation (issue #4): LatencyTransport, a transport decorator that
// puts a real TPM (embedded by default, so every output is genuine) behind
// the latency model (latency_model.h) and the chip's slot limits
// (slot_limits.h), advancing a VirtualClock (clock.h) by the modelled time.
#ifndef TPMSEC_EMULATION_LATENCY_TRANSPORT_H_
#define TPMSEC_EMULATION_LATENCY_TRANSPORT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/emulation/latency_model.h"
#include "tpmsec/result.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/clock.h"

namespace tpmsec {

// Each transmit() measures the real time spent in the inner transport and
// calls clock.adjust(modelled - real), so every reading of `clock` after it
// includes the modelled TPM latency instead of the real one. A failed inner
// transmission is not modelled (its real time stays). Host work outside
// transmit() stays real. To record modelled durations, put a
// TracingTransport reading the same VirtualClock outside this decorator.
// Not thread-safe.
//
// The chip's session and object slots and context gap (the profile's
// SlotLimits) are enforced below the model by a SlotLimitTransport
// (slot_limits.h): a refused command is answered with the chip's error code
// and modelled like any other answer.
class SlotLimitTransport;
class LatencyTransport final : public TransportDecorator {
 public:
  LatencyTransport(Transport& inner, LatencyModel model, VirtualClock& clock);
  ~LatencyTransport() override;

  Result<Bytes> transmit(ByteView command) override;
  Status reset_tpm() override;
  Status suspend_resume() override;
  // inner's description + " emulating PROFILE".
  std::string describe() const override;

  LatencyModel& model() { return model_; }
  const LatencyModel& model() const { return model_; }
  // The last modelled command (empty before the first).
  const std::optional<ModelledLatency>& last() const { return last_; }
  size_t commands() const { return commands_; }
  int64_t modelled_ns() const { return modelled_ns_; }  // total modelled TPM time
  // The slot enforcement between this and the wrapped TPM.
  SlotLimitTransport& slots() { return *slots_; }
  // Real time (`tpmsec emulate --clock real`): from now on each transmit()
  // returns only once its modelled time has also passed on the host's
  // steady clock, as the chip would answer; the clock is still adjusted by
  // modelled - real, so it reads the same as without. `*cut_short` turning
  // true ends a wait early (a signal stopping a server); nullptr: none.
  void pace_in_real_time(const std::atomic<bool>* cut_short) {
    paced_ = true;
    cut_short_ = cut_short;
  }

 private:
  std::unique_ptr<SlotLimitTransport> slots_;
  LatencyModel model_;
  VirtualClock& clock_;
  std::optional<ModelledLatency> last_;
  bool paced_ = false;
  const std::atomic<bool>* cut_short_ = nullptr;
  size_t commands_ = 0;
  int64_t modelled_ns_ = 0;
};

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_LATENCY_TRANSPORT_H_
