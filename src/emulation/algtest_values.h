// What the kept tpm2-algtest runs say about one operation, and the profile
// values made from it: measured (the runs' median, its range, the pooled
// distribution) or derived by a rule (private to the emulation layer).
#ifndef TPMSEC_SRC_EMULATION_ALGTEST_VALUES_H_
#define TPMSEC_SRC_EMULATION_ALGTEST_VALUES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tpmsec/emulation/algtest_import.h"
#include "tpmsec/emulation/latency_profile.h"

namespace tpmsec::algtest {

double round_to(double v, double unit);
double r3(double v);  // to the microsecond, as profiles keep ms

// What the kept runs say about one operation.
struct Merged {
  bool present = false;
  double ms = 0;  // median of the runs' averages
  double low = 0, high = 0;
  uint32_t runs = 0;
  uint64_t iterations = 0;
  std::vector<double> samples;  // pooled per-iteration
  std::vector<std::string> labels;
};

// The operation `key` over `runs`; not present when no run has it.
Merged merge(const std::vector<const AlgtestRun*>& runs, const std::string& key);

// Every run, grouped by VENDOR/FIRMWARE: "IFX/7.85.17.51968/{08836af27dda9f32,57dac75a27d6f427}".
std::string runs_text(const std::vector<std::string>& labels);

// The stated error of the rule that makes `variant` (kRuleErrors), 0 for none.
double stated_error(const char* variant);

// Makes the values of a profile whose values cite `source`.
struct Builder {
  std::string source;

  // A measured value: the median of the runs' averages, its range, and the
  // pooled distribution when per-iteration data exists.
  LatencyValue measured(const Merged& m, char tag, const std::string& what) const;

  // A value derived by a rule; `error` (fraction) becomes its low/high.
  LatencyValue derived(double ms, char tag, const std::string& rule_source, const std::string& note,
                       double error) const;
};

}  // namespace tpmsec::algtest

#endif  // TPMSEC_SRC_EMULATION_ALGTEST_VALUES_H_
