// --strategy and --policy: how a command that extends PCRs picks its session
// strategy. An explicit --strategy wins; otherwise the policy decides, under
// the floor (policy.h): nothing an interposer can choose lowers protection.
#ifndef TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
#define TPMSEC_SRC_CLI_STRATEGY_OPTION_H_

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "cli.h"
#include "tpmsec/policy.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/strategy.h"

namespace tpmsec::cli {

struct StrategyOption {
  std::string strategy;
  std::string policy;  // default: $TPMSEC_POLICY, else the shipped policy
  bool verbose = false;

  void add_to(CLI::App* sub);
  // The strategy for PCR extends on `tpm`. A policy decision that would lower
  // protection on the TPM's identity reads it again through an audited
  // session from `protection` (decide_on_tpm). On stderr: plain or checkpoint
  // named with what it gives up; a rule the floor overruled, and why; with
  // --verbose, the rule that decided and the facts it rests on.
  // `tuning`, when given, gets the matched rule's SessionTuning (policy.h):
  // with --strategy too, from the rule the plain identity matches (it is
  // cost only); the defaults when the policy cannot be read and only
  // $TPMSEC_POLICY or the shipped one was in question.
  Result<StrategyKind> resolve(const OpenTpm& tpm, const ProtectionConfig& protection,
                               SessionTuning* tuning = nullptr) const;
  Result<StrategyKind> resolve(const MeasuredTpm& tpm, const ProtectionConfig& protection,
                               SessionTuning* tuning = nullptr) const;

 private:
  Result<StrategyKind> resolve(TpmFacts facts, Tpm& tpm, const TpmInfo& info, const ProtectionConfig& protection,
                               SessionTuning* tuning) const;
};

// "all" or a comma-separated list of strategy names.
Result<std::vector<StrategyKind>> parse_strategy_list(const std::string& text);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_STRATEGY_OPTION_H_
