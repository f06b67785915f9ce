// The values of a profile imported from tpm2-algtest, by the rules of
// docs/latency-profiles.md ("Rules for profiles from tpm2-algtest"); private
// to the emulation layer.
#ifndef TPMSEC_SRC_EMULATION_ALGTEST_RULES_H_
#define TPMSEC_SRC_EMULATION_ALGTEST_RULES_H_

#include <string>
#include <vector>

#include "tpmsec/emulation/algtest_import.h"
#include "tpmsec/emulation/latency_profile.h"

namespace tpmsec::algtest {

// Every value of `p` from the kept runs: command variants, tail events, the
// session and encryption costs, each citing `source` and the runs it is from.
void set_rule_values(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const std::string& source);

}  // namespace tpmsec::algtest

#endif  // TPMSEC_SRC_EMULATION_ALGTEST_RULES_H_
