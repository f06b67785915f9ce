// Choosing a strategy from costs: what `tpmsec policy calibrate` decides from
// a bounded bench run, and what the shipped policy was derived from (each
// profile's figures). One place turns costs per extend into a decision and
// into a ready-to-paste policy rule.
#ifndef TPMSEC_CALIBRATION_CALIBRATION_H_
#define TPMSEC_CALIBRATION_CALIBRATION_H_

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/measure/measured_tpm.h"
#include "tpmsec/policy/policy.h"
#include "tpmsec/strategy_choice.h"

namespace tpmsec {

// From a profile's model means (extend_figures); checkpoint amortizes an
// audited PCR_Read over `checkpoint_every` extends. range_ms holds each
// cost's range: the same sum on the profile at its low and high ends
// (profile_at), and its part from E values (estimated_part).
StrategyCosts costs_from_profile(const LatencyProfile& profile, uint32_t checkpoint_every = 100);
// The share of a checkpoint stream's cost its audited reads may take: the
// interval tuning_from_profile() chooses keeps them within it, so a checkpoint
// batch costs at most ~1 % over plain extends (issue: <= 1.05 x plain).
inline constexpr double kCheckpointReadShare = 0.01;
// How sessions are best run on the profile's chip (policy.h, SessionTuning):
//   null_key          recreate when CreatePrimary of the `salt` kind costs less
//                     than a ContextLoad of the kept key, else reload;
//   checkpoint_every  the smallest N whose audited read (PCR_Read + the HMAC
//                     session's cost) over N extends stays within
//                     kCheckpointReadShare of a plain extend.
SessionTuning tuning_from_profile(const LatencyProfile& profile, SaltKind salt);
// One line saying why, with the figures: "null key: recreate (CreatePrimary
// 11.60 ms < ContextLoad 36.00 ms); checkpoint every 733 (audited read 22.0 ms
// over 733 extends <= 1% of plain 3.00 ms)".
std::string tuning_reason(const LatencyProfile& profile, SaltKind salt);

// From a bench run: steady-state medians (checkpoint: the mean, its cost is amortized).
StrategyCosts costs_from_bench(const BenchResult& result, const std::string& source);
// From `tpmsec bench --json` output; errors name `origin`.
Result<StrategyCosts> costs_from_bench_json(const nlohmann::json& bench, const std::string& origin);

// ---------------------------------------------------------------- ranges

// The range of `kind`'s cost, if the costs have one (a profile's).
const CostRange* cost_range(const StrategyCosts& costs, StrategyKind kind);
// The share (0..1) of `kind`'s central cost that comes from E values; 0
// without a range.
double estimated_share(const StrategyCosts& costs, StrategyKind kind);
// "24.36 ms (23.30-25.42)" and, when part of it is estimated, ", 74% E";
// without a range just "24.36 ms".
std::string cost_text(const StrategyCosts& costs, StrategyKind kind);

// What the ranges say about a decision for `chosen`, one line each, empty
// when the costs have no ranges or nothing is uncertain:
//   "decision rests on estimated values (E): ..." when E values make up part
//     of the chosen strategy's cost or of the runner-up's and their ranges
//     overlap; "the runner-up rests on estimated values (E): ..." when only
//     the runner-up's is estimated and its range stays clear of the chosen one's;
//   "within the uncertainty of RUNNER-UP: ..." when the two ranges overlap;
//   "within the uncertainty of the N ms budget (it may fit or not): ..." when
//     `budget_ms` (> 0) lies inside the chosen cost's range, or a more
//     protective strategy's range reaches below it.
// The runner-up is the cheapest other strategy `floor` allows of the chosen
// one's protection (prevention, detection, none), else the cheapest other.
// Decisions stay on the central figures; these lines say how firm they are.
std::vector<std::string> uncertainty_notes(StrategyKind chosen, const StrategyCosts& costs, double budget_ms = 0,
                                           ProtectionFloor floor = ProtectionFloor::kPrevention);

// The properties policy rules test (policy.h), from costs.
std::map<std::string, double> measured_properties(const StrategyCosts& costs);

// The facts a policy is matched against for an open TPM: its identity (the
// profile's when emulating) and, when emulating, the profile's figures, with
// where each came from: the profile's are kProfile; the TPM's own identity is
// kNoBus on an in_process() transport and kUnauthenticated on any other (a
// plain GetCapability; decide_on_tpm authenticates it when a decision needs it).
TpmFacts facts_of(const MeasuredTpm& tpm);
// The same for a TPM that plays `profile` (--emulate), known before any TPM
// command: the protect path is opened with them (ProtectOptions::facts).
TpmFacts facts_of(const LatencyProfile& profile);
// (facts_of(const TpmInfo&, const Transport&), the protect path's, is in policy.h.)

// A rule for the TPM `facts` identifies (manufacturer, vendor glob, the
// firmware's major version when known), with the decision, reason and source.
PolicyRule rule_for(const std::string& name, const TpmFacts& facts, const Calibration& c, const std::string& source);

// A policy with a rule per profile, decided by choose_strategy() under
// `floor` from the profile's figures and citing them, then (below the
// prevention floor only) rules on measured properties for TPMs no profile
// names, then a default rule. `command` is cited as how the file was made.
// The text is validated with parse_policy before it is returned. Under the
// prevention floor (the shipped policy) no rule chooses plain or checkpoint.
Result<std::string> derive_policy(const std::vector<LatencyProfile>& profiles, double budget_ms,
                                  const std::string& command, ProtectionFloor floor = ProtectionFloor::kPrevention);

// What Linux can do for the same decision: keep CONFIG_TCG_TPM2_HMAC, or boot
// with tpm.disable_pcr_integrity=1.
std::string linux_equivalent(StrategyKind extend);

}  // namespace tpmsec

#endif  // TPMSEC_CALIBRATION_CALIBRATION_H_
