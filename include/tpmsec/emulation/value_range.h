// The uncertainty of a latency profile's values (docs/latency-profiles.md,
// "Uncertainty"), from this one place: every value's range, and the profile
// at either end of its ranges, so that one formula gives a figure and its range.
//
// A value's range is the profile's low_ms/high_ms where it states them (the
// runs' spread for M, the rule's validated error for D), otherwise the
// default of its tag:
//   M  ms -/+ 1.645 x jitter_ms (the p5-p95 band of its measured spread)
//   D  ms / (1 + e) to ms / (1 - e), e = the largest validated rule error
//      (kRuleErrors in algtest_import.h: 0.40; a rule's error is
//      derived / measured - 1, so the measured value lies in that interval)
//   P  as D (a related operation measured on the same chip)
//   E  ms / 2 to ms x 2 (kEstimateFactor: not validated)
//   B  0 to ms (a bound)
#ifndef TPMSEC_EMULATION_VALUE_RANGE_H_
#define TPMSEC_EMULATION_VALUE_RANGE_H_

#include <string>

#include <nlohmann/json.hpp>

#include "tpmsec/emulation/latency_profile.h"

namespace tpmsec {

// The relative error e for tags D and P (0 for the others, whose ranges are not of that form).
double default_relative_error(char tag);
inline constexpr double kEstimateFactor = 2.0;

struct ValueRange {
  double low_ms = 0;
  double high_ms = 0;
  bool stated = false;  // the profile gives low_ms/high_ms; false: the tag's default
};
ValueRange value_range(const LatencyValue& value);
// "stated" or "default for M: p5-p95 of the jitter" etc., for reports.
std::string range_origin(const LatencyValue& value);

enum class RangeEnd { kLow, kHigh };
// The profile with every value (command variants, hmac_session,
// param_encryption_per_byte) at the low or high end of its range; jitter,
// seed and tail events unchanged. Any figure computed from it (extend_figures,
// a priced replay) is that figure's low or high end: one formula for the
// central figure and its range.
LatencyProfile profile_at(const LatencyProfile& profile, RangeEnd end);
// The profile with only its E values kept (every other value, every jitter
// and the tail events gone): a figure computed from it is the part that
// rests on estimates.
LatencyProfile estimated_part(const LatencyProfile& profile);

// A figure with its range for JSON outputs: {"ms", "low_ms", "high_ms",
// "estimated_share"} (ms to three decimals; the share of ms from E values, 0..1, to two).
nlohmann::json range_json(double ms, double low_ms, double high_ms, double estimated_ms);

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_VALUE_RANGE_H_
