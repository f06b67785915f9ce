// `tpmsec bench`: what bus protection costs on a TPM, per command and per
// lifecycle strategy, on a real or emulated (virtual-clock) TPM.
//
// The runner drives a Tpm whose transport is wrapped in a TracingTransport
// feeding a TraceLog: every TPM command's duration comes from the trace (so
// it is the modelled latency when emulated), and host time is what the
// clock saw minus the TPM time.
#ifndef TPMSEC_MEASURE_BENCH_H_
#define TPMSEC_MEASURE_BENCH_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/measure/statistics.h"
#include "tpmsec/strategy.h"
#include "tpmsec/strategy_choice.h"
#include "tpmsec/transport/tracing.h"

namespace tpmsec {

// Collects trace records; the TracingTransport's sink appends here.
class TraceLog {
 public:
  void append(const TraceRecord& r) { records_.push_back(r); }
  size_t size() const { return records_.size(); }
  const std::vector<TraceRecord>& records() const { return records_; }
  // Records from index `from` on.
  std::vector<TraceRecord> since(size_t from) const {
    return std::vector<TraceRecord>(records_.begin() + static_cast<long>(std::min(from, records_.size())),
                                    records_.end());
  }
  TracingTransport::Sink sink() {
    return [this](const TraceRecord& r) { append(r); };
  }

 private:
  std::vector<TraceRecord> records_;
};

// One timed operation: wall time on the bench clock, the TPM commands it sent.
struct Sample {
  int64_t start_ns = 0;
  double total_ms = 0;
  double tpm_ms = 0;
  double host_ms = 0;
  std::vector<TraceRecord> commands;
};

struct PrimitiveResult {
  std::string name;
  Distribution tpm_ms;
  Distribution host_us;
  std::vector<Sample> samples;
};

struct StrategyResult {
  StrategyKind kind = StrategyKind::kPlain;
  Sample open;                  // opening the stream (null key, audited baseline read)
  std::vector<Sample> extends;  // extends[0] is the first extend
  Sample finish;                // closing the stream (checkpoint: the final audited read)
  Distribution per_extend_ms;   // steady state: extends[1..]
  Distribution host_us;         // steady state, host time per extend
  double first_extend_ms = 0;
  double tpm_commands_per_extend = 0;  // steady-state mean
  size_t first_extend_commands = 0;
  double ratio_to_plain = 0;
};

struct BenchOptions {
  int iterations = 100;
  uint32_t pcr = 16;
  uint16_t bank = alg::kSha256;
  std::vector<StrategyKind> strategies;  // empty: all
  uint32_t checkpoint_every = 100;
  bool primitives = true;
  ProtectionConfig protection;
  // What the recommendation is decided under (strategy_choice.h).
  double budget_ms = kDefaultBudgetMs;
  ProtectionFloor floor = ProtectionFloor::kPrevention;
  // Called as work completes: (done, total, what).
  std::function<void(size_t, size_t, const std::string&)> progress;
  // Set (e.g. from a SIGINT handler) to stop early; the run still cleans up.
  const std::atomic<bool>* stop = nullptr;
};

struct BenchResult {
  nlohmann::json tpm;  // identity as `tpmsec info --json`, plus "emulated"
  std::string transport;
  bool virtual_clock = false;
  // Where the times come from when not measured here: "ftrace" for a kernel
  // capture (ftrace_import.h). Empty: "real" or "virtual" by virtual_clock.
  std::string clock;
  std::string date;
  std::string version;
  BenchOptions options;
  std::vector<PrimitiveResult> primitives;
  std::vector<StrategyResult> strategies;
  std::string recommendation;
  bool interrupted = false;
  // Emulated runs: the profile's modelled cost per extend with its range
  // (costs_from_profile), printed next to the measured figures. Empty on a
  // real TPM.
  std::optional<StrategyCosts> model;
};

// Runs the benchmark. `tpm` must send through a TracingTransport writing to
// `log` on `clock`. The PCR is reset at the end, and every handle the run
// created is flushed, also when stopped early.
Result<BenchResult> run_bench(Tpm& tpm, TraceLog& log, const Clock& clock, const TpmInfo& info,
                              const BenchOptions& options);

// Each measured strategy's steady-state cost per extend (the median;
// checkpoint's mean, its audited reads amortized) and the run's noise.
StrategyCosts strategy_costs(const BenchResult& r);

// Sets every strategy's ratio_to_plain (median, mean for checkpoint, over
// plain's median; 0 without plain) and the result's recommendation.
void rate_strategies(BenchResult& r);

// The current UTC time as reports date results: "2026-12-02T16:40:00Z".
std::string utc_timestamp();

// The steady-state extend closest to the median (extends[1..]; extends[0]
// when it is the only one), or nullptr without extends. Reports break this
// sample down as the strategy's representative extend.
const Sample* representative_extend(const StrategyResult& s);

// "real", "virtual" or the import's clock ("ftrace").
std::string clock_name(const BenchResult& r);

// Reports.
std::string bench_text(const BenchResult& r);  // the readable report (header, tables, breakdowns, recommendation)
std::string function_graph(const StrategyResult& s);  // a steady-state extend in the seed's function_graph format
nlohmann::json bench_json(const BenchResult& r);      // schema: docs/bench-json.md
std::string bench_csv(const BenchResult& r);          // one row per sample
nlohmann::json bench_trace(const BenchResult& r);     // Chrome trace-event JSON (opens in Perfetto)
std::string bench_svg(const BenchResult& r);          // cost per extend by strategy, stacked by TPM command

// The label of a traced command in reports: "ContextLoad (null key)", "StartAuthSession (ECC salt)".
std::string command_label(const CommandShape& shape);

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_BENCH_H_
