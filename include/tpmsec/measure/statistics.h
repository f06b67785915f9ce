// Latency distributions as benchmarks report them.
#ifndef TPMSEC_MEASURE_STATISTICS_H_
#define TPMSEC_MEASURE_STATISTICS_H_

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpmsec {

struct Distribution {
  size_t n = 0;
  double min = 0, median = 0, mean = 0, p90 = 0, p99 = 0, max = 0;
};

// The distribution of `samples`: its median, p90 and p99 by linear
// interpolation between closest ranks (quantile_of, tpmsec/order_statistics.h).
Distribution summarize(std::vector<double> samples);

nlohmann::json to_json(const Distribution& d);
// Missing or non-numeric keys read as 0 (input may be hostile: never throws).
Distribution distribution_from_json(const nlohmann::json& j);

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_STATISTICS_H_
