// Turns a real TPM's `tpmsec bench --json` result into a latency profile, so
// one person's measurement can be emulated by everyone (`--emulate`).
#ifndef TPMSEC_MEASURE_PROFILE_FROM_BENCH_H_
#define TPMSEC_MEASURE_PROFILE_FROM_BENCH_H_

#include <string>

#include <nlohmann/json.hpp>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/result.h"

namespace tpmsec {

// Every variant the bench measured becomes a value tagged M (its median, with
// a jitter from the spread), sourced to the bench run; variants the bench
// does not measure are derived from measured ones and tagged E with the rule.
// A result from an emulated run is refused: it would only copy a profile.
// `origin` names the input in errors.
Result<LatencyProfile> profile_from_bench(const nlohmann::json& bench, const std::string& id,
                                          const std::string& origin);

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_PROFILE_FROM_BENCH_H_
