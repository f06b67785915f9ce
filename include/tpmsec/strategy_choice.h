// Choosing a strategy from what each costs per extend: the one function
// behind every recommendation tpmsec prints (bench, policy calibrate, the
// shipped policy's rules via policy derive). Pure: costs in, decision out.
#ifndef TPMSEC_STRATEGY_CHOICE_H_
#define TPMSEC_STRATEGY_CHOICE_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/strategy.h"

namespace tpmsec {

// A modelled cost's uncertainty: the same sum of commands at their low and
// high ends (value_range.h profile_at), and the part of the central
// figure that comes from estimated values (tag E).
struct CostRange {
  double low_ms = 0;
  double high_ms = 0;
  double estimated_ms = 0;
};

// Steady-state cost of one protected PCR extend per strategy, in ms.
struct StrategyCosts {
  std::map<StrategyKind, double> per_extend_ms;
  double start_session_ms = 0;  // a salted StartAuthSession (0: not measured)
  // Each cost's noise (a bench run's standard error of the median); none
  // for a model's means. Two costs closer than their noises added differ by
  // nothing the measurement can tell.
  std::map<StrategyKind, double> noise_ms;
  std::string source;  // where the figures come from, for citations
  // A profile's costs (costs_from_profile) only: each cost's range; empty
  // for measured costs, whose uncertainty is noise_ms.
  std::map<StrategyKind, CostRange> range_ms;
};

// The least protection calibrate and derive may choose. Prevention unless
// the operator asks (--allow-detection, --allow-plain) for a policy of their own.
enum class ProtectionFloor { kPrevention, kDetection, kNone };
// "" for kPrevention, "--allow-detection", "--allow-plain".
std::string_view floor_flag(ProtectionFloor floor);

struct Calibration {
  double budget_ms = 0;
  ProtectionFloor floor = ProtectionFloor::kPrevention;
  StrategyKind extend = StrategyKind::kResident;  // the most protective allowed strategy that fits
  StrategyKind other = StrategyKind::kPerCommand;
  bool fits = false;  // false: nothing allowed fits, `extend` is the cheapest allowed
  // Every measured strategy in order of preference, whether it fit, and
  // whether the floor allowed it.
  struct Candidate {
    StrategyKind kind;
    double ms;
    bool fits;
    bool allowed;
  };
  std::vector<Candidate> candidates;
  std::string reason;  // one sentence with the figures
  // When the floor kept prevention over budget and a lower strategy fits:
  // "checkpoint would fit at 6.57 ms but only detects (--allow-detection)".
  std::string floor_note;
};

// Prevention (the cheapest of resident, saved-context, per-command) over
// detection (checkpoint) over none (plain), never below `floor`: the first
// whose cost per extend is within `budget_ms`; when none fits, the cheapest
// allowed, except that a more protective strategy within the noise of it
// (both costs' noise_ms added, at least 1 %) is a tie and wins. Under the prevention
// floor that is always the cheapest prevention strategy measured (resident
// when none was). Other protected commands are rare and always get the
// cheapest prevention strategy measured.
Calibration choose_strategy(const StrategyCosts& costs, double budget_ms,
                            ProtectionFloor floor = ProtectionFloor::kPrevention);

// The budget `policy calibrate` and `policy derive` use unless told: the
// shipped policy's. 20 ms per extend keeps a 12,313-entry IMA boot (the
// seed thread's) under 4.1 minutes of TPM time.
inline constexpr double kDefaultBudgetMs = 20.0;

// The one-line recommendation bench prints: "recommendation: resident
// (prevention) — <reason>", or what to measure when nothing allowed was.
std::string recommendation_line(const Calibration& c, const StrategyCosts& costs);

}  // namespace tpmsec

#endif  // TPMSEC_STRATEGY_CHOICE_H_
