// --strategy and --policy: how a command that extends PCRs picks its session
// strategy. An explicit --strategy wins; otherwise the policy decides, under
// the floor (policy.h): nothing an interposer can choose lowers protection.
#ifndef TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
#define TPMSEC_SRC_CLI_STRATEGY_OPTION_H_

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/protect.h"
#include "tpmsec/strategy.h"

namespace tpmsec::cli {

struct StrategyOption {
  std::string strategy;
  std::string policy;  // default: $TPMSEC_POLICY, else the shipped policy
  bool verbose = false;

  void add_to(CLI::App* sub);
  // Puts the choice into `request` (protect.h, whose plan_extends() decides
  // and says on stderr what a weak strategy gives up, which rule the floor
  // overruled and, with --verbose, the rule and the facts it rests on);
  // kUsage for an unknown strategy. `items_from`: where the TPM string's
  // items came from (ProtectionOptions::items_origin()).
  Status apply_to(ProtectRequest& request, std::string_view items_from) const;
};

// --policy FILE into `request`, which may already name the TPM string's
// policy= (ProtectionOptions::request()), given in `items_from`: another file
// is kUsage (flag_or_item(), protection_options.h).
Status apply_policy_option(const std::string& policy, std::string_view items_from, ProtectRequest& request);

// "all" or a comma-separated list of strategy names.
Result<std::vector<StrategyKind>> parse_strategy_list(const std::string& text);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
