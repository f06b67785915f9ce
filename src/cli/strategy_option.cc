#include "strategy_option.h"

#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/calibration.h"
#include "tpmsec/policy.h"
#include "tpmsec/text.h"

namespace tpmsec::cli {
namespace {

void print_tuning(const Policy& p, const PolicyRule& rule, const SessionTuning& t) {
  fmt::print(stderr, "tpmsec: sessions on this TPM (policy {} rule '{}'{}): null key {}, checkpoint every {}\n",
             p.origin, rule.name, rule.null_key || rule.checkpoint_every ? "" : ", defaults",
             null_key_load_name(t.null_key), t.checkpoint_every);
}

}  // namespace

void StrategyOption::add_to(CLI::App* sub) {
  sub->add_option("--strategy", strategy,
                  "Session strategy for the extends: per-command, saved-context, resident, plain or checkpoint "
                  "(default: what the policy decides for this TPM)");
  sub->add_option("--policy", policy,
                  "Policy file deciding the strategy when --strategy is not given (default: $TPMSEC_POLICY or "
                  "data/policy/default.toml; see docs/policy.md)");
  sub->add_flag("-v,--verbose", verbose, "Say on stderr which policy rule chose the strategy, and why");
}

Result<StrategyKind> StrategyOption::resolve(const OpenTpm& tpm, const ProtectionConfig& protection,
                                             SessionTuning* tuning) const {
  return resolve(tpm.facts(), tpm.tpm(), tpm.info(), protection, tuning);
}

Result<StrategyKind> StrategyOption::resolve(const MeasuredTpm& tpm, const ProtectionConfig& protection,
                                             SessionTuning* tuning) const {
  return resolve(facts_of(tpm), *tpm.tpm, tpm.info, protection, tuning);
}

Result<StrategyKind> StrategyOption::resolve(TpmFacts facts, Tpm& tpm, const TpmInfo& info,
                                             const ProtectionConfig& protection, SessionTuning* tuning) const {
  if (!strategy.empty()) {
    auto kind = parse_strategy(strategy);
    if (!kind.ok()) return usage_error(kind.error().message());
    if (tuning) {
      // The strategy is the operator's; how its sessions run on this chip is
      // still the policy's (no TPM command: the plain identity suffices).
      Result<Policy> p = load_command_policy(policy);
      if (p.ok()) {
        PolicyDecision d = decide(*p, facts);
        *tuning = d.tuning;
        if (verbose && d.rule) print_tuning(*p, *d.rule, d.tuning);
      } else if (!policy.empty()) {
        return p.error();
      }
    }
    fmt::print(stderr, "{}", weak_strategy_notice(*kind, "operator's --strategy"));
    return *kind;
  }
  TPMSEC_ASSIGN_OR_RETURN(Policy p, load_command_policy(policy));
  TPMSEC_ASSIGN_OR_RETURN(PolicyDecision d, decide_on_tpm(p, facts, tpm, protection, &info));
  if (!d.rule) return usage_error(fmt::format("{}: no rule matches this TPM", p.origin));
  if (tuning) *tuning = d.tuning;
  if (verbose) {
    fmt::print(stderr, "tpmsec: policy {} rule '{}' (line {}): {} for extends — {}\n", p.origin, d.rule->name,
               d.rule->line, strategy_name(d.lifted_extend.value_or(d.extend)), d.rule->reason);
    fmt::print(stderr, "tpmsec: the decision rests on: {}\n", fmt::join(d.rests_on, "; "));
    print_tuning(p, *d.rule, d.tuning);
  }
  if (d.lifted_extend) {
    fmt::print(stderr, "tpmsec: policy {} rule '{}' chose {} for extends, but {}: using {} ({})\n", p.origin,
               d.rule->name, strategy_name(*d.lifted_extend), d.floor_reason, strategy_name(d.extend),
               d.fallback_reason);
  }
  fmt::print(stderr, "{}",
             weak_strategy_notice(d.extend, fmt::format("policy {} rule '{}'", p.origin, d.rule->name)));
  return d.extend;
}

Result<std::vector<StrategyKind>> parse_strategy_list(const std::string& text) {
  if (text.empty() || text == "all") return all_strategies();
  std::vector<StrategyKind> out;
  for (const std::string& name : split_list(text)) {
    auto kind = parse_strategy(name);
    if (!kind.ok()) return usage_error(kind.error().message());
    if (std::find(out.begin(), out.end(), *kind) == out.end()) out.push_back(*kind);
  }
  if (out.empty()) return usage_error(fmt::format("no strategy named in '{}'", text));
  return out;
}

}  // namespace tpmsec::cli
