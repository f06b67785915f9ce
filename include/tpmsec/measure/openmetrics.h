// The Prometheus text exposition format (node_exporter's textfile collector
// reads it): what bench, replay and policy calibrate measured, one series per
// strategy, labelled with the TPM's identity, so a fleet's Prometheus can
// aggregate thousands of machines.
#ifndef TPMSEC_MEASURE_OPENMETRICS_H_
#define TPMSEC_MEASURE_OPENMETRICS_H_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/measure/statistics.h"

namespace tpmsec {

struct BenchResult;

// What one strategy measured: its steady-state cost per extend and the TPM
// commands each extend sent.
struct StrategyMetrics {
  std::string strategy;
  Distribution per_extend_ms;
  double tpm_commands_per_extend = 0;
};

// The strategies a bench (or calibrate) run measured.
std::vector<StrategyMetrics> strategy_metrics(const BenchResult& r);

// A decision the run made for PCR extends: `by` "budget" (the most
// protective strategy within the budget: calibrate's decision, bench's
// recommendation) or "policy" (the policy file's rule for this TPM).
struct DecisionMetric {
  std::string by;
  std::string strategy;
};

// The text exposition (docs/openmetrics.md lists every family): # HELP and
// # TYPE before each family, names prefixed tpmsec_, label values escaped
// (backslash, quote, newline), values in seconds at nanosecond resolution in
// their shortest form. Every series carries one label set whatever the
// command: command, profile (the emulated profile's id, else ""), transport
// (the TPM string's kind: embedded, swtpm, mssim, device), manufacturer,
// vendor, firmware, emulated; per-strategy series add strategy. `tpm` is the
// identity as `tpmsec info --json` gives it. A strategy with no measured
// extend gets no series; `complete` is false for an interrupted run
// (tpmsec_run_complete 0). `budget_ms` > 0 is exported as
// tpmsec_budget_seconds; each decision as tpmsec_decision_info 1.
std::string openmetrics_text(const nlohmann::json& tpm, std::string_view transport, std::string_view command,
                             const std::vector<StrategyMetrics>& strategies, bool complete, double budget_ms = 0,
                             const std::vector<DecisionMetric>& decisions = {});

// The transport label: the kind of a TPM string or describe() ("swtpm" of
// "swtpm:host=h,port=1", "embedded" of "embedded emulating slb9670").
std::string transport_kind(std::string_view transport);

// A label value as the format escapes it: \\, \" and \n.
std::string openmetrics_escape(std::string_view value);

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_OPENMETRICS_H_
