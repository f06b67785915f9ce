// The Prometheus text exposition format (node_exporter's textfile collector
// reads it): what bench, replay and policy calibrate measured, one series per
// strategy, labelled with the TPM's identity, so a fleet's Prometheus can
// aggregate thousands of machines.
#ifndef TPMSEC_OPENMETRICS_H_
#define TPMSEC_OPENMETRICS_H_

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/statistics.h"

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

// The text exposition: # HELP and # TYPE before each family, names prefixed
// tpmsec_, label values escaped (backslash, quote, newline). `tpm` is the
// identity as `tpmsec info --json` gives it (manufacturer, vendor,
// firmware_version, emulated). A strategy with no measured extend gets no
// series; `complete` is false for an interrupted run (tpmsec_run_complete 0).
std::string openmetrics_text(const nlohmann::json& tpm, std::string_view transport, std::string_view command,
                             const std::vector<StrategyMetrics>& strategies, bool complete);

// A label value as the format escapes it: \\, \" and \n.
std::string openmetrics_escape(std::string_view value);

}  // namespace tpmsec

#endif  // TPMSEC_OPENMETRICS_H_
