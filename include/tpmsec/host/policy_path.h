// Where the policy files are: the host's knowledge (the data directory,
// $TPMSEC_POLICY), apart from the policy decision, which only reads a file
// it is given (tpmsec/policy/policy.h: parse_policy, load_policy) and so
// builds on the core alone. The protect path loads the policy a command
// follows from here (load_command_policy(), tpmsec/protect.h).
#ifndef TPMSEC_HOST_POLICY_PATH_H_
#define TPMSEC_HOST_POLICY_PATH_H_

#include <string>

namespace tpmsec {

// The shipped policy, data_dir()/policy/default.toml.
std::string shipped_policy_path();

// $TPMSEC_POLICY if set, else shipped_policy_path().
std::string default_policy_path();

// The policy file a command follows: `path` (--policy) when given, else
// $TPMSEC_POLICY, else the shipped default; operator_chosen for the first two
// (only a policy the operator chose may lower protection: policy.h's floor).
struct PolicyLocation {
  std::string path;
  bool operator_chosen = false;
};
PolicyLocation command_policy_location(const std::string& path);

}  // namespace tpmsec

#endif  // TPMSEC_HOST_POLICY_PATH_H_
