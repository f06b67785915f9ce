// Deriving a policy from latency profiles: how data/policy/default.toml is made.
#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/calibration.h"

namespace tpmsec {
namespace {

size_t specificity(const PolicyRule& r) {
  return (r.manufacturer ? 1 : 0) + (r.vendor ? 1 : 0) + (r.firmware_min ? 1 : 0) + r.when.size();
}

std::string figures(const StrategyCosts& c) {
  std::vector<std::string> parts;
  for (StrategyKind k : all_strategies()) {
    auto it = c.per_extend_ms.find(k);
    if (it != c.per_extend_ms.end()) parts.push_back(fmt::format("{} {:.2f}", strategy_name(k), it->second));
  }
  return fmt::format("{} ms per extend", fmt::join(parts, ", "));
}

}  // namespace

Result<std::string> derive_policy(const std::vector<LatencyProfile>& profiles, double budget_ms,
                                  const std::string& command) {
  std::vector<PolicyRule> rules;
  for (const LatencyProfile& p : profiles) {
    StrategyCosts costs = costs_from_profile(p);
    Calibration c = choose_strategy(costs, budget_ms);
    TpmFacts facts = facts_from_info(emulated_info(p, TpmInfo{}).info);
    std::string source = fmt::format("profile {} ({}): {}; `tpmsec profiles show {}`", p.id, p.name, figures(costs), p.id);
    rules.push_back(rule_for(p.id, facts, c, source));
  }
  std::stable_sort(rules.begin(), rules.end(),
                   [](const PolicyRule& a, const PolicyRule& b) { return specificity(a) > specificity(b); });

  std::string out = fmt::format(
      "# tpmsec policy: which session strategy protects PCR extends (and other protected\n"
      "# commands) on which TPM. Rules are tried in order; the first that matches decides.\n"
      "# Format: docs/policy.md. Made by `{}`:\n"
      "# each profile's rule is the most protective strategy whose cost per extend (the\n"
      "# profile's figures, cited in `source`) fits {:.1f} ms; prevention > detection > none.\n"
      "# Edit freely; `tpmsec policy check FILE` validates, `tpmsec policy show` explains.\n\n"
      "schema = \"tpmsec-policy/1\"\n",
      command, budget_ms);
  std::vector<PolicyRule> kept;
  for (const PolicyRule& r : rules) {
    auto earlier = std::find_if(kept.begin(), kept.end(), [&](const PolicyRule& k) { return covers(k, r); });
    if (earlier != kept.end()) {
      out += fmt::format("\n# {}: same identity as rule '{}' above, which decides for it too ({} there, {} here)\n",
                         r.name, earlier->name, strategy_name(earlier->extend), strategy_name(r.extend));
      continue;
    }
    out += "\n" + to_toml(r);
    kept.push_back(r);
  }

  // TPMs no profile names: decided by what they measure, when measured.
  PolicyRule detect;
  detect.name = "measured-hmac-over-budget";
  detect.when = {{"extend_hmac_ms", Condition::Op::kGreater, budget_ms},
                 {"checkpoint_ms", Condition::Op::kLessEqual, budget_ms}};
  detect.extend = StrategyKind::kCheckpoint;
  detect.other = StrategyKind::kPerCommand;
  detect.reason = fmt::format(
      "a resident HMAC'd extend over {:.1f} ms does not fit the budget; plain extends verified by an audited "
      "read every 100 (checkpoint) do",
      budget_ms);
  detect.source = command;
  PolicyRule none = detect;
  none.name = "measured-everything-over-budget";
  none.when = {{"checkpoint_ms", Condition::Op::kGreater, budget_ms}};
  none.extend = StrategyKind::kPlain;
  none.reason = fmt::format("even checkpointed extends cost over {:.1f} ms on this TPM", budget_ms);
  PolicyRule fallback;
  fallback.name = "default";
  fallback.extend = StrategyKind::kResident;
  fallback.other = StrategyKind::kPerCommand;
  fallback.reason =
      "a TPM without a profile or measurement keeps prevention with one resident session (Linux 6.12's lazy "
      "flush); measure it with `tpmsec policy calibrate` and add a rule";
  fallback.source = "docs/policy.md";
  out += "\n" + to_toml(detect) + "\n" + to_toml(none) + "\n" + to_toml(fallback);

  TPMSEC_RETURN_IF_ERROR(status_of(parse_policy(out, "<derived policy>")));
  return out;
}

}  // namespace tpmsec
