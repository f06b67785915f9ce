// Prometheus text exposition format 0.0.4 (what node_exporter's textfile
// collector reads): https://prometheus.io/docs/instrumenting/exposition_formats/
// `promtool check metrics` accepts it (tests/measure/openmetrics_test.cc runs it).
#include "tpmsec/measure/openmetrics.h"

#include <fmt/format.h>

#include <cmath>

#include "tpmsec/measure/bench.h"

namespace tpmsec {

std::string openmetrics_escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string transport_kind(std::string_view transport) {
  size_t end = transport.find_first_of(": ");
  return std::string(transport.substr(0, end));
}

namespace {

std::string label_text(const nlohmann::json& tpm, const char* key) {
  auto it = tpm.find(key);
  if (it == tpm.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_null()) return "";
  return it->dump();
}

// A sample value in fmt's shortest round-trip form (Go's ParseFloat reads it).
std::string number(double v) { return fmt::format("{}", v); }

// Milliseconds as seconds at nanosecond resolution: a whole number of
// nanoseconds divided by 1e9 is the double nearest that decimal, so its
// shortest form is the decimal itself (0.148920707, not 0.14892070699999999).
std::string seconds(double ms) { return number(std::round(ms * 1e6) / 1e9); }

}  // namespace

std::vector<StrategyMetrics> strategy_metrics(const BenchResult& r) {
  std::vector<StrategyMetrics> out;
  for (const StrategyResult& s : r.strategies) {
    out.push_back({std::string(strategy_name(s.kind)), s.per_extend_ms, s.tpm_commands_per_extend});
  }
  return out;
}

std::string openmetrics_text(const nlohmann::json& tpm, std::string_view transport, std::string_view command,
                             const std::vector<StrategyMetrics>& strategies, bool complete, double budget_ms,
                             const std::vector<DecisionMetric>& decisions) {
  auto emulated = tpm.find("emulated");
  bool is_emulated = emulated != tpm.end() && emulated->is_boolean() && emulated->get<bool>();
  std::string base = fmt::format(
      "command=\"{}\",profile=\"{}\",transport=\"{}\",manufacturer=\"{}\",vendor=\"{}\",firmware=\"{}\","
      "emulated=\"{}\"",
      openmetrics_escape(command), openmetrics_escape(is_emulated ? label_text(tpm, "profile") : ""),
      openmetrics_escape(transport_kind(transport)), openmetrics_escape(label_text(tpm, "manufacturer")),
      openmetrics_escape(label_text(tpm, "vendor")), openmetrics_escape(label_text(tpm, "firmware_version")),
      is_emulated ? "true" : "false");

  std::string out;
  auto family = [&out](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("tpmsec_run_complete", "gauge", "1 when the run measured all it set out to, 0 when it was interrupted.");
  out += fmt::format("tpmsec_run_complete{{{}}} {}\n", base, complete ? 1 : 0);
  if (budget_ms > 0) {
    family("tpmsec_budget_seconds", "gauge", "Budget per protected PCR extend the decision was made under.");
    out += fmt::format("tpmsec_budget_seconds{{{}}} {}\n", base, seconds(budget_ms));
  }
  if (!decisions.empty()) {
    family("tpmsec_decision_info", "gauge",
           "1 for the strategy chosen for PCR extends; by=budget: the most protective within the budget, "
           "by=policy: the policy's rule for this TPM.");
    for (const DecisionMetric& d : decisions) {
      out += fmt::format("tpmsec_decision_info{{{},strategy=\"{}\",by=\"{}\"}} 1\n", base,
                         openmetrics_escape(d.strategy), openmetrics_escape(d.by));
    }
  }

  std::vector<const StrategyMetrics*> measured;
  for (const StrategyMetrics& s : strategies) {
    if (s.per_extend_ms.n > 0) measured.push_back(&s);
  }
  if (measured.empty()) return out;
  auto labels = [&](const StrategyMetrics& s) {
    return fmt::format("{},strategy=\"{}\"", base, openmetrics_escape(s.strategy));
  };
  // Prometheus' base unit is the second (the CLI's reports say ms). A
  // summary: the quantiles of the run's steady-state extends, their sum and count.
  family("tpmsec_extend_seconds", "summary", "Steady-state time of one protected PCR extend, by quantile.");
  for (const StrategyMetrics* s : measured) {
    const Distribution& d = s->per_extend_ms;
    out += fmt::format("tpmsec_extend_seconds{{{},quantile=\"0.5\"}} {}\n", labels(*s), seconds(d.median));
    out += fmt::format("tpmsec_extend_seconds{{{},quantile=\"0.99\"}} {}\n", labels(*s), seconds(d.p99));
    out += fmt::format("tpmsec_extend_seconds_sum{{{}}} {}\n", labels(*s), seconds(d.mean * static_cast<double>(d.n)));
    out += fmt::format("tpmsec_extend_seconds_count{{{}}} {}\n", labels(*s), d.n);
  }
  family("tpmsec_extend_samples", "gauge", "Steady-state extends the quantiles are computed from.");
  for (const StrategyMetrics* s : measured) {
    out += fmt::format("tpmsec_extend_samples{{{}}} {}\n", labels(*s), s->per_extend_ms.n);
  }
  family("tpmsec_tpm_commands_per_extend", "gauge", "TPM commands one steady-state protected PCR extend sends.");
  for (const StrategyMetrics* s : measured) {
    out += fmt::format("tpmsec_tpm_commands_per_extend{{{}}} {}\n", labels(*s), number(s->tpm_commands_per_extend));
  }
  return out;
}

}  // namespace tpmsec
