// The latency model: per command, the profile's base latency for its
// variant, the HMAC-session and parameter-encryption costs, seeded jitter
// and tail events.
#include "tpmsec/emulation/latency_model.h"
#include "tpmsec/emulation/command_variant.h"
#include "tpmsec/text.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace tpmsec {
LatencyModel::LatencyModel(LatencyProfile profile, ModelOptions options)
    : profile_(std::move(profile)), options_(options) {
  reseed(options_.seed.value_or(profile_.seed));
}

void LatencyModel::reseed(uint64_t seed) {
  seed_ = seed;
  rng_.seed(seed);
}

double LatencyModel::uniform() {
  // The top 53 bits as a double in [0, 1): identical on every platform.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

double LatencyModel::normal() {
  // Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
  double u1 = 1.0 - uniform();
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

bool LatencyModel::tail_enabled(const TailEvent& event) const { return options_.tail_events.value_or(event.enabled); }

const LatencyValue& LatencyModel::value_for(const std::string& variant) const {
  auto it = profile_.commands.find(variant);
  if (it != profile_.commands.end()) return it->second;
  if (size_t dot = variant.find('.'); dot != std::string::npos) {
    it = profile_.commands.find(variant.substr(0, dot));
    if (it != profile_.commands.end()) return it->second;
  }
  it = profile_.commands.find("default");
  if (it != profile_.commands.end()) return it->second;
  static const LatencyValue kZero{};
  return kZero;  // only for a hand-built profile without "default"
}

ModelledLatency LatencyModel::model(const CommandShape& shape) {
  ModelledLatency m;
  m.variant = variant_of(shape);
  const double scale = options_.jitter_scale;
  double jitter = 0;
  // One draw per component with jitter, so the random sequence depends only
  // on the profile and the command sequence.
  auto draw = [&](double stddev) {
    if (stddev > 0 && scale > 0) jitter += normal() * stddev * scale;
  };

  const LatencyValue& base = value_for(m.variant);
  m.base_ms = base.ms;
  draw(base.jitter_ms);

  if (shape.hmac_session) {
    m.hmac_ms = profile_.hmac_session.ms;
    draw(profile_.hmac_session.jitter_ms);
  }

  if (size_t bytes = encrypted_parameter_bytes(shape); bytes > 0) {
    const LatencyValue& per_byte = profile_.param_encryption_per_byte;
    m.encryption_ms = per_byte.ms * static_cast<double>(bytes);
    draw(per_byte.jitter_ms * static_cast<double>(bytes));
  }

  double body = m.base_ms + m.hmac_ms + m.encryption_ms;
  m.jitter_ms = std::max(body + jitter, 0.0) - body;  // truncated at zero

  for (const TailEvent& t : profile_.tail_events) {
    if (!tail_enabled(t) || !glob_match(t.variant, m.variant)) continue;
    if (uniform() < t.probability) m.tail_ms += t.extra_ms;
  }
  m.total_ms = body + m.jitter_ms + m.tail_ms;
  return m;
}

}  // namespace tpmsec
