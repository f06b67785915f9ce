#include "strategy_option.h"

#include <fmt/format.h>

#include <algorithm>

#include "protection_options.h"
#include "tpmsec/text.h"

namespace tpmsec::cli {

void StrategyOption::add_to(CLI::App* sub) {
  sub->add_option("--strategy", strategy,
                  "Session strategy for the extends: per-command, saved-context, resident, plain or checkpoint "
                  "(default: what the policy decides for this TPM)");
  sub->add_option("--policy", policy,
                  "Policy file deciding the strategy when --strategy is not given (default: $TPMSEC_POLICY or "
                  "data/policy/default.toml; see docs/policy.md)");
  sub->add_flag("-v,--verbose", verbose, "Say on stderr which policy rule chose the strategy, and why");
}

Status StrategyOption::apply_to(ProtectRequest& request, std::string_view items_from) const {
  if (!strategy.empty()) {
    auto kind = parse_strategy(strategy);
    if (!kind.ok()) return usage_error(kind.error().message());
    request.strategy = *kind;
  }
  TPMSEC_RETURN_IF_ERROR(apply_policy_option(policy, items_from, request));
  request.verbose = verbose;
  return ok_status();
}

Status apply_policy_option(const std::string& policy, std::string_view items_from, ProtectRequest& request) {
  // The request may carry the TPM string's policy= item (ProtectionOptions):
  // two policies are a usage error, not a silent choice.
  TPMSEC_ASSIGN_OR_RETURN(request.policy, flag_or_item("--policy", policy, "policy", request.policy, items_from));
  return ok_status();
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
