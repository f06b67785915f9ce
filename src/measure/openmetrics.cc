// Prometheus text exposition format 0.0.4 (what node_exporter's textfile
// collector reads): https://prometheus.io/docs/instrumenting/exposition_formats/
#include "tpmsec/openmetrics.h"

#include <fmt/format.h>

#include "tpmsec/bench.h"

namespace tpmsec {

std::string openmetrics_escape(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

namespace {

std::string label_text(const nlohmann::json& tpm, const char* key) {
  auto it = tpm.find(key);
  if (it == tpm.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_null()) return "";
  return it->dump();
}

// A sample value: Go's ParseFloat reads fmt's shortest round-trip form.
std::string number(double v) { return fmt::format("{}", v); }

}  // namespace

std::vector<StrategyMetrics> strategy_metrics(const BenchResult& r) {
  std::vector<StrategyMetrics> out;
  for (const StrategyResult& s : r.strategies) {
    out.push_back({std::string(strategy_name(s.kind)), s.per_extend_ms, s.tpm_commands_per_extend});
  }
  return out;
}

std::string openmetrics_text(const nlohmann::json& tpm, std::string_view transport, std::string_view command,
                             const std::vector<StrategyMetrics>& strategies, bool complete) {
  auto emulated = tpm.find("emulated");
  bool is_emulated = emulated != tpm.end() && emulated->is_boolean() && emulated->get<bool>();
  std::string base = fmt::format(
      "manufacturer=\"{}\",vendor=\"{}\",firmware=\"{}\",transport=\"{}\",emulated=\"{}\"",
      openmetrics_escape(label_text(tpm, "manufacturer")), openmetrics_escape(label_text(tpm, "vendor")),
      openmetrics_escape(label_text(tpm, "firmware_version")), openmetrics_escape(transport),
      is_emulated ? "true" : "false");
  std::string cmd = fmt::format("command=\"{}\"", openmetrics_escape(command));

  std::string out;
  out += "# HELP tpmsec_run_complete 1 when the run measured all it set out to, 0 when it was interrupted.\n";
  out += "# TYPE tpmsec_run_complete gauge\n";
  out += fmt::format("tpmsec_run_complete{{{},{}}} {}\n", cmd, base, complete ? 1 : 0);

  std::vector<const StrategyMetrics*> measured;
  for (const StrategyMetrics& s : strategies) {
    if (s.per_extend_ms.n > 0) measured.push_back(&s);
  }
  if (measured.empty()) return out;
  auto labels = [&](const StrategyMetrics& s) {
    return fmt::format("{},{},strategy=\"{}\"", cmd, base, openmetrics_escape(s.strategy));
  };
  // Prometheus' base unit is the second (the CLI's reports say ms).
  out += "# HELP tpmsec_extend_seconds Steady-state time of one protected PCR extend, by quantile.\n";
  out += "# TYPE tpmsec_extend_seconds gauge\n";
  for (const StrategyMetrics* s : measured) {
    out += fmt::format("tpmsec_extend_seconds{{{},quantile=\"0.5\"}} {}\n", labels(*s), number(s->per_extend_ms.median / 1e3));
    out += fmt::format("tpmsec_extend_seconds{{{},quantile=\"0.99\"}} {}\n", labels(*s), number(s->per_extend_ms.p99 / 1e3));
  }
  out += "# HELP tpmsec_extend_samples Steady-state extends the quantiles are computed from.\n";
  out += "# TYPE tpmsec_extend_samples gauge\n";
  for (const StrategyMetrics* s : measured) {
    out += fmt::format("tpmsec_extend_samples{{{}}} {}\n", labels(*s), s->per_extend_ms.n);
  }
  out += "# HELP tpmsec_tpm_commands_per_extend TPM commands one steady-state protected PCR extend sends.\n";
  out += "# TYPE tpmsec_tpm_commands_per_extend gauge\n";
  for (const StrategyMetrics* s : measured) {
    out += fmt::format("tpmsec_tpm_commands_per_extend{{{}}} {}\n", labels(*s), number(s->tpm_commands_per_extend));
  }
  return out;
}

}  // namespace tpmsec
