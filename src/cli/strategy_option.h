// --strategy and --policy: how a command that extends PCRs picks its session
// strategy. An explicit --strategy wins; otherwise the policy decides.
#ifndef TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
#define TPMSEC_SRC_CLI_STRATEGY_OPTION_H_

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "tpmsec/measured_tpm.h"
#include "tpmsec/strategy.h"

namespace tpmsec::cli {

struct StrategyOption {
  std::string strategy;
  std::string policy;  // default: default_policy_path()
  bool verbose = false;

  void add_to(CLI::App* sub);
  // The strategy for PCR extends on `tpm`; with --verbose, says on stderr
  // which policy rule decided, and why.
  Result<StrategyKind> resolve(const MeasuredTpm& tpm) const;
};

// "all" or a comma-separated list of strategy names.
Result<std::vector<StrategyKind>> parse_strategy_list(const std::string& text);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
