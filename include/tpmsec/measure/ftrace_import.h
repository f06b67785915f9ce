// `tpmsec trace import`: what protection costs on a TPM you cannot run tpmsec on, from a Linux ftrace
// function_graph capture of its driver (as in the seed thread: tpm2_pcr_extend with
// tpm2_start_auth_session and tpm_transmit_cmd). No TPM is involved. Two steps:
//   parse_function_graph()  the text into call trees, one per top-level call, CPU by CPU (the optional
//                           abstime and proc columns, the overhead markers + ! # * @ $, units us/ms/s).
//   bench_from_ftrace()     every tpm_transmit_cmd into a TPM command with a duration, every
//                           tpm2_pcr_extend into an extend of the strategy the kernel used
//                           (per-command, resident or plain); other tpm2_* calls into primitives only.
// The result is a BenchResult with clock "ftrace" and an identity that says it was imported, so
// bench_json() writes the same tpmsec-bench/1 document `tpmsec compare` and `tpmsec profile from-bench`
// read. Errors: anything the parser does not accept is an error value naming the file and line; a
// capture is untrusted text, every nesting bounded. Pure functions and values: thread-safe.
// What the parser accepts and how calls become commands and strategies: docs/compare.md,
// "tpmsec trace import: a kernel capture as a bench result".
#ifndef TPMSEC_MEASURE_FTRACE_IMPORT_H_
#define TPMSEC_MEASURE_FTRACE_IMPORT_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/measure/bench.h"
#include "tpmsec/result.h"

namespace tpmsec {

// One function call of a function_graph capture.
struct FtraceCall {
  std::string function;  // as printed, with compiler suffixes (".isra.0") kept
  int cpu = 0;
  size_t line = 0;  // where it starts (1-based)
  double duration_us = 0;
  std::optional<double> start_s;  // the abstime column of its first line, when present
  std::vector<FtraceCall> children;
};

// A capture: the top-level calls in the order they started.
struct FtraceCapture {
  std::string origin;  // names the input in errors and reports
  std::vector<FtraceCall> calls;
};

// Parses a function_graph capture. Errors (kParse) read "ORIGIN:LINE: what".
Result<FtraceCapture> parse_function_graph(std::string_view text, const std::string& origin);

struct FtraceImportOptions {
  std::string label;  // what the TPM was ("IFX SLB9670, Fedora 38 VM"); default "unknown TPM"
  // TPM_PT_MANUFACTURER as text ("IFX"), at most 4 characters; empty: unknown
  // (profile from-bench then refuses the result: a profile needs one).
  std::string manufacturer;
  std::string date;  // when imported; default now (utc_timestamp())
};

// The bench result of one or more captures of the same TPM. Every imported
// extend counts as steady state (the kernel was already running); a kParse
// error when the captures hold no TPM command.
Result<BenchResult> bench_from_ftrace(const std::vector<FtraceCapture>& captures, const FtraceImportOptions& options);

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_FTRACE_IMPORT_H_
