// The policy a command follows: found by the host (tpmsec/host/policy_path.h),
// read by the policy decision (load_policy).
#include "tpmsec/host/policy_path.h"
#include "tpmsec/protect.h"

namespace tpmsec {

Result<Policy> load_command_policy(const std::string& path) {
  PolicyLocation where = command_policy_location(path);
  TPMSEC_ASSIGN_OR_RETURN(Policy p, load_policy(where.path));
  p.operator_chosen = where.operator_chosen;
  return p;
}

}  // namespace tpmsec
