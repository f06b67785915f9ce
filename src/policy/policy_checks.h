// Static checks of a policy's rules: what makes a rule unable to ever match.
#ifndef TPMSEC_SRC_POLICY_POLICY_CHECKS_H_
#define TPMSEC_SRC_POLICY_POLICY_CHECKS_H_

#include <optional>
#include <string>
#include <vector>

#include "tpmsec/policy/policy.h"

namespace tpmsec {

struct RuleProblem {
  size_t line = 0;
  std::string what;
};

// The first problem: a rule after one that covers it (an earlier rule with
// no stricter identity and no conditions of its own), an empty firmware
// range, contradictory conditions on one property, or a last rule that does
// not match every TPM.
std::optional<RuleProblem> check_rules(const std::vector<PolicyRule>& rules);

}  // namespace tpmsec

#endif  // TPMSEC_SRC_POLICY_POLICY_CHECKS_H_
