// Deriving a policy from latency profiles: how data/policy/default.toml is made.
#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/calibration/calibration.h"

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

// One rule per profile, the most specific first.
std::vector<PolicyRule> profile_rules(const std::vector<LatencyProfile>& profiles, double budget_ms,
                                      ProtectionFloor floor) {
  std::vector<PolicyRule> rules;
  for (const LatencyProfile& p : profiles) {
    const TpmInfo info = emulated_info(p, TpmInfo{}).info;
    // ECC: the salt of every chip a profile describes (and of the emulation).
    const SessionTuning tuning = tuning_from_profile(p, SaltKind::kEcc);
    StrategyCosts costs = costs_from_profile(p, tuning.checkpoint_every);
    Calibration c = choose_strategy(costs, budget_ms, floor);
    TpmFacts facts = facts_from_info(info);
    std::string source = fmt::format("profile {} ({}): {}; {}; `tpmsec profiles show {}`", p.id, p.name, figures(costs),
                                     tuning_reason(p, SaltKind::kEcc), p.id);
    PolicyRule rule = rule_for(p.id, facts, c, source);
    rule.null_key = tuning.null_key;
    rule.checkpoint_every = tuning.checkpoint_every;
    rules.push_back(std::move(rule));
  }
  std::stable_sort(rules.begin(), rules.end(),
                   [](const PolicyRule& a, const PolicyRule& b) { return specificity(a) > specificity(b); });
  return rules;
}

// The file's head: what the policy is, how it was made, and its floor.
std::string policy_head(const std::string& command, double budget_ms, ProtectionFloor floor) {
  std::string floor_text;
  switch (floor) {
    case ProtectionFloor::kPrevention:
      floor_text =
          "# and never below prevention: the identity and timings rules match on are read from\n"
          "# the TPM without authentication, so this policy never lowers protection on them;\n"
          "# over budget it keeps the cheapest prevention strategy. For a policy of your own that\n"
          "# may, derive with --allow-detection or --allow-plain and pass it with --policy FILE\n"
          "# or $TPMSEC_POLICY (docs/policy.md, \"What a decision rests on\").\n";
      break;
    case ProtectionFloor::kDetection:
      floor_text =
          "# down to detection (--allow-detection): prevention > detection. Rules choosing\n"
          "# checkpoint take effect only from a policy file you choose, on an audited identity.\n";
      break;
    case ProtectionFloor::kNone:
      floor_text =
          "# down to none (--allow-plain): prevention > detection > none. Rules choosing plain\n"
          "# or checkpoint take effect only from a policy file you choose, on an audited identity.\n";
      break;
  }
  return fmt::format(
      "# tpmsec policy: which session strategy protects PCR extends (and other protected\n"
      "# commands) on which TPM. Rules are tried in order; the first that matches decides.\n"
      "# Format: docs/policy.md. Made by `{}`:\n"
      "# each profile's rule is the most protective strategy whose cost per extend (the\n"
      "# profile's figures, cited in `source`) fits {:.1f} ms,\n"
      "{}"
      "# `tpmsec policy check FILE` validates, `tpmsec policy show` explains.\n\n"
      "schema = \"tpmsec-policy/1\"\n",
      command, budget_ms, floor_text);
}

// The profiles' rules as TOML; a rule whose identity an earlier one covers
// is a comment naming it.
std::string rules_text(const std::vector<PolicyRule>& rules) {
  std::string out;
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
  return out;
}

// TPMs no profile names: decided by what they measure, when measured. Only
// below the prevention floor: under it every measured rule would say what
// the default says. Bus timings can be inflated by an interposer that
// delays responses, so these rules lower protection only on a profile's
// figures unless the operator adds trust_timings = true. Then the default rule.
std::string fallback_rules_text(const std::string& command, double budget_ms, ProtectionFloor floor) {
  const char* kTimingNote =
      "# Bus timings (a bench result, a calibration) can be inflated by an interposer that delays\n"
      "# responses: this rule lowers protection on a profile's figures only, unless you add\n"
      "# trust_timings = true.\n";
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
  PolicyRule default_rule;
  default_rule.name = "default";
  default_rule.extend = StrategyKind::kResident;
  default_rule.other = StrategyKind::kPerCommand;
  default_rule.reason =
      "a TPM without a profile or measurement keeps prevention with one resident session (Linux 6.12's lazy "
      "flush); measure it with `tpmsec policy calibrate` and add a rule";
  default_rule.source = "docs/policy.md";
  std::string out;
  if (floor != ProtectionFloor::kPrevention) out += "\n" + std::string(kTimingNote) + to_toml(detect);
  if (floor == ProtectionFloor::kNone) out += "\n" + std::string(kTimingNote) + to_toml(none);
  out += "\n" + to_toml(default_rule);
  return out;
}

}  // namespace

Result<std::string> derive_policy(const std::vector<LatencyProfile>& profiles, double budget_ms,
                                  const std::string& command, ProtectionFloor floor) {
  std::vector<PolicyRule> rules = profile_rules(profiles, budget_ms, floor);
  std::string out = policy_head(command, budget_ms, floor);
  out += rules_text(rules);
  out += fallback_rules_text(command, budget_ms, floor);

  TPMSEC_ASSIGN_OR_RETURN(Policy derived, parse_policy(out, "<derived policy>"));
  if (floor == ProtectionFloor::kPrevention) {
    for (const PolicyRule& r : derived.rules) {
      if (r.lowers_protection()) {
        return runtime_error(fmt::format("derived rule '{}' chooses below prevention under the floor", r.name));
      }
    }
  }
  return out;
}

}  // namespace tpmsec
