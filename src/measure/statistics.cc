#include "tpmsec/measure/statistics.h"

#include <algorithm>
#include <numeric>

namespace tpmsec {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(rank);
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

Distribution summarize(std::vector<double> samples) {
  Distribution d;
  d.n = samples.size();
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  d.min = samples.front();
  d.max = samples.back();
  d.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  d.median = percentile(samples, 50);
  d.p90 = percentile(samples, 90);
  d.p99 = percentile(samples, 99);
  return d;
}

nlohmann::json to_json(const Distribution& d) {
  return {{"n", d.n}, {"min", d.min}, {"median", d.median}, {"mean", d.mean}, {"p90", d.p90}, {"p99", d.p99},
          {"max", d.max}};
}

Distribution distribution_from_json(const nlohmann::json& j) {
  Distribution d;
  if (!j.is_object()) return d;
  auto number = [&j](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  double n = number("n");
  d.n = n > 0 ? static_cast<size_t>(n) : 0;
  d.min = number("min");
  d.median = number("median");
  d.mean = number("mean");
  d.p90 = number("p90");
  d.p99 = number("p99");
  d.max = number("max");
  return d;
}

}  // namespace tpmsec
