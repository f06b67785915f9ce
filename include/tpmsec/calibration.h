// Choosing a strategy from costs: what `tpmsec policy calibrate` decides from
// a bounded bench run, and what the shipped policy was derived from (each
// profile's figures). One place turns costs per extend into a decision and
// into a ready-to-paste policy rule.
#ifndef TPMSEC_CALIBRATION_H_
#define TPMSEC_CALIBRATION_H_

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/bench.h"
#include "tpmsec/latency_model.h"
#include "tpmsec/measured_tpm.h"
#include "tpmsec/policy.h"

namespace tpmsec {

// Steady-state cost of one protected PCR extend per strategy, in ms.
struct StrategyCosts {
  std::map<StrategyKind, double> per_extend_ms;
  double start_session_ms = 0;  // a salted StartAuthSession (0: not measured)
  std::string source;           // where the figures come from, for citations
};

// From a profile's model means (extend_figures); checkpoint amortizes an
// audited PCR_Read over `checkpoint_every` extends.
StrategyCosts costs_from_profile(const LatencyProfile& profile, uint32_t checkpoint_every = 100);
// From a bench run: steady-state medians (checkpoint: the mean, its cost is amortized).
StrategyCosts costs_from_bench(const BenchResult& result, const std::string& source);
// From `tpmsec bench --json` output; errors name `origin`.
Result<StrategyCosts> costs_from_bench_json(const nlohmann::json& bench, const std::string& origin);

// The properties policy rules test (policy.h), from costs.
std::map<std::string, double> measured_properties(const StrategyCosts& costs);

// The facts a policy is matched against for an open TPM: its identity (the
// profile's when emulating) and, when emulating, the profile's figures.
TpmFacts facts_of(const MeasuredTpm& tpm);

struct Calibration {
  double budget_ms = 0;
  StrategyKind extend = StrategyKind::kPlain;  // the most protective strategy that fits
  StrategyKind other = StrategyKind::kPerCommand;
  bool fits = false;  // false: nothing fits, `extend` is the cheapest measured
  // Every measured strategy in order of preference, and whether it fit.
  struct Candidate {
    StrategyKind kind;
    double ms;
    bool fits;
  };
  std::vector<Candidate> candidates;
  std::string reason;  // one sentence with the figures
};

// Prevention (the cheapest of resident, saved-context, per-command) over
// detection (checkpoint) over none (plain): the first whose cost per extend
// is within `budget_ms`. Other protected commands are rare and always get the
// cheapest prevention strategy measured.
Calibration choose_strategy(const StrategyCosts& costs, double budget_ms);

// The budget `policy calibrate` and `policy derive` use unless told: the
// shipped policy's. 20 ms per extend keeps a 12,313-entry IMA boot (the
// seed thread's) under 4.1 minutes of TPM time.
inline constexpr double kDefaultBudgetMs = 20.0;

// A rule for the TPM `facts` identifies (manufacturer, vendor glob, the
// firmware's major version when known), with the decision, reason and source.
PolicyRule rule_for(const std::string& name, const TpmFacts& facts, const Calibration& c, const std::string& source);

// A policy with a rule per profile, decided by choose_strategy() from the
// profile's figures and citing them, then rules on measured properties for
// TPMs no profile names, then a default rule. `command` is cited as how the
// file was made. The text is validated with parse_policy before it is returned.
Result<std::string> derive_policy(const std::vector<LatencyProfile>& profiles, double budget_ms,
                                  const std::string& command);

// What Linux can do for the same decision: keep CONFIG_TCG_TPM2_HMAC, or boot
// with tpm.disable_pcr_integrity=1.
std::string linux_equivalent(StrategyKind extend);

}  // namespace tpmsec

#endif  // TPMSEC_CALIBRATION_H_
