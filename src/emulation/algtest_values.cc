// Merging the kept runs' view of one operation, and the values made from it
// (algtest_values.h).
#include "algtest_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "tpmsec/order_statistics.h"

namespace tpmsec::algtest {

double round_to(double v, double unit) { return std::round(v / unit) * unit; }
double r3(double v) { return round_to(v, 0.001); }

Merged merge(const std::vector<const AlgtestRun*>& runs, const std::string& key) {
  Merged m;
  std::vector<double> avgs;
  for (const AlgtestRun* r : runs) {
    auto it = r->ops.find(key);
    if (it == r->ops.end()) continue;
    avgs.push_back(it->second.avg_ms);
    m.iterations += it->second.iterations;
    m.samples.insert(m.samples.end(), it->second.samples_ms.begin(), it->second.samples_ms.end());
    m.labels.push_back(r->label);
  }
  if (avgs.empty()) return m;
  m.present = true;
  m.runs = static_cast<uint32_t>(avgs.size());
  m.ms = median_of(avgs);
  m.low = *std::min_element(avgs.begin(), avgs.end());
  m.high = *std::max_element(avgs.begin(), avgs.end());
  std::sort(m.samples.begin(), m.samples.end());
  return m;
}

std::string runs_text(const std::vector<std::string>& labels) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::string& label : labels) {
    size_t slash = label.rfind('/');
    std::string dir = slash == std::string::npos ? "" : label.substr(0, slash + 1);
    std::string run = slash == std::string::npos ? label : label.substr(slash + 1);
    if (groups.empty() || groups.back().first != dir) groups.push_back({dir, {}});
    groups.back().second.push_back(run);
  }
  std::vector<std::string> parts;
  for (const auto& [dir, runs] : groups) {
    parts.push_back(runs.size() == 1 ? dir + runs[0] : fmt::format("{}{{{}}}", dir, fmt::join(runs, ",")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

LatencyValue Builder::measured(const Merged& m, char tag, const std::string& what) const {
  LatencyValue v;
  v.ms = r3(m.ms);
  v.tag = tag;
  v.source = fmt::format("{} {}", source, runs_text(m.labels));
  v.runs = m.runs;
  v.iterations = m.iterations;
  if (m.runs > 1) {
    v.low_ms = r3(m.low);
    v.high_ms = r3(m.high);
  }
  double jitter = 0;
  if (m.samples.size() >= 20) {
    ValueDistribution d;
    d.n = m.samples.size();
    d.median_ms = r3(quantile_of(m.samples, 0.5));
    d.p5_ms = r3(quantile_of(m.samples, 0.05));
    d.p95_ms = r3(quantile_of(m.samples, 0.95));
    d.max_ms = r3(m.samples.back());
    v.distribution = d;
    jitter = (d.p95_ms - d.p5_ms) / 3.29;  // the stddev of a normal with that 90% range
  } else {
    jitter = (m.high - m.low) / 4;
  }
  v.jitter_ms = r3(std::clamp(jitter, 0.02 * v.ms, 0.3 * v.ms));
  v.note =
      fmt::format("{}: median of {} run average{} ({} iterations)", what, m.runs, m.runs == 1 ? "" : "s", m.iterations);
  return v;
}

LatencyValue Builder::derived(double ms, char tag, const std::string& rule_source, const std::string& note,
                              double error) const {
  LatencyValue v;
  v.ms = r3(ms);
  v.jitter_ms = r3(0.02 * ms);
  v.tag = tag;
  v.source = rule_source;
  v.note = note;
  if (error > 0) {
    // error = derived / measured - 1 within +/- error: measured is between
    // ms / (1 + error) and ms / (1 - error).
    v.low_ms = r3(ms / (1 + error));
    v.high_ms = r3(ms / (1 - error));
    if (*v.low_ms > v.ms) v.low_ms = v.ms;
    if (*v.high_ms < v.ms) v.high_ms = v.ms;
  }
  return v;
}

double stated_error(const char* variant) {
  for (const RuleError& e : kRuleErrors) {
    if (std::string_view(e.variant) == variant) return e.error;
  }
  return 0;
}

}  // namespace tpmsec::algtest
