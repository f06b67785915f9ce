#include "tpmsec/measure/statistics.h"

#include <algorithm>
#include <numeric>

#include "tpmsec/order_statistics.h"

namespace tpmsec {

Distribution summarize(std::vector<double> samples) {
  Distribution d;
  d.n = samples.size();
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  d.min = samples.front();
  d.max = samples.back();
  d.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  d.median = quantile_of(samples, 0.50);
  d.p90 = quantile_of(samples, 0.90);
  d.p99 = quantile_of(samples, 0.99);
  return d;
}

nlohmann::json to_json(const Distribution& d) {
  return {{"n", d.n},     {"min", d.min}, {"median", d.median}, {"mean", d.mean},
          {"p90", d.p90}, {"p99", d.p99}, {"max", d.max}};
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
