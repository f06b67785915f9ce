// --strategy and --policy: how a command that extends PCRs picks its session
// strategy. An explicit --strategy wins; otherwise the policy decides, under
// the floor (policy.h): nothing an interposer can choose lowers protection.
#ifndef TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
#define TPMSEC_SRC_CLI_STRATEGY_OPTION_H_

#include <CLI/CLI.hpp>

#include <string>
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
  // kUsage for an unknown strategy.
  Status apply_to(ProtectRequest& request) const;
};

// --policy FILE into `request`, which may already name $TPM2TOOLS_TCTI's
// policy= (ProtectionOptions::request()): another file is kUsage.
Status apply_policy_option(const std::string& policy, ProtectRequest& request);

// "all" or a comma-separated list of strategy names.
Result<std::vector<StrategyKind>> parse_strategy_list(const std::string& text);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
