#include "tpmsec/order_statistics.h"

#include <algorithm>
#include <cmath>

namespace tpmsec {

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double quantile_of(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double rank = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(rank);
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

double upper_tail_mean(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t from = static_cast<size_t>(std::floor(q * static_cast<double>(sorted.size())));
  from = std::min(from, sorted.size() - 1);
  double sum = 0;
  for (size_t i = from; i < sorted.size(); ++i) sum += sorted[i];
  return sum / static_cast<double>(sorted.size() - from);
}

}  // namespace tpmsec
