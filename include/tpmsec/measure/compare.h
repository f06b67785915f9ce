// `tpmsec compare`: bench results from different TPMs or machines side by
// side (`tpmsec bench --json`, `tpmsec trace import --json`; schema
// tpmsec-bench/1, docs/bench-json.md).
//
// A column per result, labelled with its TPM (manufacturer, vendor string,
// firmware) and where the figures come from: a real TPM, an emulated profile,
// or an ftrace import. Rows: each command (TPM time, median and p99 ms) and
// each strategy (per extend in steady state, median and p99 ms, and the
// ratio to plain). Results are hostile input: anything that is not a
// tpmsec-bench/1 document is a kUsage error naming its origin.
#ifndef TPMSEC_MEASURE_COMPARE_H_
#define TPMSEC_MEASURE_COMPARE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/measure/statistics.h"
#include "tpmsec/result.h"

namespace tpmsec {

struct CompareColumn {
  std::string origin;  // the file it came from
  std::string tpm;     // "IFX SLB9670 fw 7.85"
  std::string source;  // "real TPM (device:/dev/tpmrm0)", "emulated: slb9670", "ftrace import"
  // Primitive name and TPM time (ms), in the result's order.
  std::vector<std::pair<std::string, Distribution>> commands;
  struct Strategy {
    Distribution per_extend_ms;  // steady state
    double ratio_to_plain = 0;   // 0: no plain in that result
  };
  std::map<std::string, Strategy> strategies;  // "per-command" -> ...
};

struct Comparison {
  std::vector<CompareColumn> columns;
  std::vector<std::string> commands;    // rows, in the order the results list them
  std::vector<std::string> strategies;  // rows, in the order reports list strategies
};

// One column from a parsed bench result; `origin` names it in errors.
Result<CompareColumn> compare_column(const nlohmann::json& bench, const std::string& origin);

// The rows every column contributes to.
Comparison compare_columns(std::vector<CompareColumn> columns);

std::string compare_text(const Comparison& c);      // an aligned plain-text table
std::string compare_markdown(const Comparison& c);  // a GitHub markdown table
std::string compare_svg(const Comparison& c);       // per-extend cost by strategy, a bar per result

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_COMPARE_H_
