// The uncertainty of a profile's values: each value's range (stated, or
// its tag's default) and the profile at either end of its ranges.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tpmsec/emulation/algtest_import.h"
#include "tpmsec/emulation/value_range.h"

namespace tpmsec {

double default_relative_error(char tag) {
  switch (tag) {
    case kTagDerived:
    case kTagProxy: {
      double e = 0;
      for (const RuleError& r : kRuleErrors) e = std::max(e, r.error);
      return e;
    }
    default:
      return 0.0;
  }
}

namespace {
// p5-p95 of a normal: mean -/+ 1.645 standard deviations.
constexpr double kP5P95 = 1.645;
}  // namespace

ValueRange value_range(const LatencyValue& v) {
  if (v.low_ms && v.high_ms) return {*v.low_ms, *v.high_ms, true};
  switch (v.tag) {
    case kTagMeasured:
      return {std::max(0.0, v.ms - kP5P95 * v.jitter_ms), v.ms + kP5P95 * v.jitter_ms, false};
    case kTagBound:
      return {0.0, v.ms, false};
    case kTagEstimate:
      return {v.ms / kEstimateFactor, v.ms * kEstimateFactor, false};
    default: {
      // value = true x (1 + err), |err| <= e: true is between ms / (1 + e) and ms / (1 - e).
      const double e = default_relative_error(v.tag);
      return {v.ms / (1 + e), v.ms / (1 - e), false};
    }
  }
}

std::string range_origin(const LatencyValue& v) {
  if (v.low_ms && v.high_ms) return "stated in the profile";
  switch (v.tag) {
    case kTagMeasured:
      return "default for M: p5-p95 of the jitter";
    case kTagBound:
      return "default for B: 0 to the bound";
    case kTagEstimate:
      return fmt::format("default for E: /{:g} to x{:g}", kEstimateFactor, kEstimateFactor);
    default: {
      const double e = default_relative_error(v.tag);
      return fmt::format("default for {}: /{:g} to /{:g}", v.tag, 1 + e, 1 - e);
    }
  }
}

namespace {

template <typename F>
LatencyProfile map_values(const LatencyProfile& p, F f) {
  LatencyProfile out = p;
  for (auto& [variant, value] : out.commands) f(value);
  f(out.hmac_session);
  f(out.param_encryption_per_byte);
  return out;
}

}  // namespace

LatencyProfile profile_at(const LatencyProfile& p, RangeEnd end) {
  return map_values(p, [end](LatencyValue& v) {
    ValueRange r = value_range(v);
    v.ms = end == RangeEnd::kLow ? r.low_ms : r.high_ms;
    v.low_ms = v.high_ms = v.ms;
  });
}

LatencyProfile estimated_part(const LatencyProfile& p) {
  LatencyProfile out = map_values(p, [](LatencyValue& v) {
    if (v.tag != kTagEstimate) v.ms = 0;
    v.jitter_ms = 0;
    v.low_ms = v.high_ms = v.ms;
  });
  out.tail_events.clear();
  return out;
}

nlohmann::json range_json(double ms, double low_ms, double high_ms, double estimated_ms) {
  auto ms3 = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  const double share = ms > 0 ? std::clamp(estimated_ms / ms, 0.0, 1.0) : 0.0;
  return {{"ms", ms3(ms)},
          {"low_ms", ms3(low_ms)},
          {"high_ms", ms3(high_ms)},
          {"estimated_share", std::round(100.0 * share) / 100.0}};
}

}  // namespace tpmsec
