// The latency model (issue #4): what one TPM command costs under a latency
// profile (latency_profile.h). LatencyTransport (latency_transport.h) makes a
// real TPM take that time on a VirtualClock, so that an emulated hour of TPM
// traffic passes in seconds.
//
// The model per command: base(variant) + hmac_session (when the command
// carries a non-password session) + param_encryption_per_byte x encrypted
// bytes + jitter (normal, stddev jitter_ms per component, total truncated at
// zero) + tail events that fire; the variant and the encrypted bytes are
// read from the command's shape (command_variant.h). It is deterministic for
// a given seed and command sequence, on every platform (its own
// normal/uniform draws from std::mt19937_64, not the library's distributions).
#ifndef TPMSEC_EMULATION_LATENCY_MODEL_H_
#define TPMSEC_EMULATION_LATENCY_MODEL_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/transport/tracing.h"

namespace tpmsec {

struct ModelOptions {
  std::optional<uint64_t> seed;     // default: the profile's
  std::optional<bool> tail_events;  // true: all on; false: all off; default: each event's `enabled`
  double jitter_scale = 1.0;        // 0 turns jitter off
};

// One modelled command, by component (all in ms).
struct ModelledLatency {
  std::string variant;
  double base_ms = 0;        // the variant's mean
  double hmac_ms = 0;        // hmac_session mean, when it applies
  double encryption_ms = 0;  // per-byte cost x encrypted_parameter_bytes
  double jitter_ms = 0;      // the drawn jitter (after truncation at zero)
  double tail_ms = 0;        // tail events that fired
  double total_ms = 0;       // base + hmac + encryption + jitter + tail, >= 0
};

class LatencyModel {
 public:
  explicit LatencyModel(LatencyProfile profile, ModelOptions options = {});

  // The latency of one command; advances the random state.
  double latency_ms(const CommandShape& shape) { return model(shape).total_ms; }
  ModelledLatency model(const CommandShape& shape);

  // The value used for `variant`: exact match, else the command name before
  // the first '.', else "default".
  const LatencyValue& value_for(const std::string& variant) const;

  // Restarts the random sequence.
  void reseed(uint64_t seed);

  const LatencyProfile& profile() const { return profile_; }
  uint64_t seed() const { return seed_; }

 private:
  double uniform();  // [0, 1)
  double normal();   // standard normal (Box-Muller, one value per two draws)
  bool tail_enabled(const TailEvent& event) const;

  LatencyProfile profile_;
  ModelOptions options_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_LATENCY_MODEL_H_
