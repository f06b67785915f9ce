#include "tpmsec/host/policy_path.h"

#include <cstdlib>

#include "tpmsec/host/data_dir.h"

namespace tpmsec {

std::string shipped_policy_path() { return data_dir() + "/policy/default.toml"; }

std::string default_policy_path() {
  const char* env = std::getenv("TPMSEC_POLICY");
  if (env && *env) return env;
  return shipped_policy_path();
}

PolicyLocation command_policy_location(const std::string& path) {
  const char* env = std::getenv("TPMSEC_POLICY");
  bool chosen = !path.empty() || (env && *env);
  return PolicyLocation{path.empty() ? default_policy_path() : path, chosen};
}

}  // namespace tpmsec
