// tpmsec bench: what protection costs on this TPM (or an emulated one).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "cli.h"
#include "floor_flags.h"
#include "progress.h"
#include "strategy_option.h"
#include "tpmsec/calibration/calibration.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/measure/openmetrics.h"
#include "tpmsec/pcr.h"
#include "tpmsec/policy/policy.h"
#include "tpmsec/protect.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec::cli {
namespace {

struct BenchFlags {
  TpmOption tpm;
  std::string strategies;
  int iterations = 100;
  uint32_t pcr = 16;
  uint32_t checkpoint_every = 100;
  bool force_pcr = false;
  bool no_primitives = false;
  double budget_ms = kDefaultBudgetMs;
  FloorFlags floor;
  std::string policy;
  std::string json, csv, trace, svg, openmetrics;
  ProgressFlags progress;
};

void add_bench_flags(CLI::App* sub, BenchFlags& o) {
  o.tpm.add_to(sub, /*state_changing=*/true);
  sub->add_option("--strategies", o.strategies,
                  "Comma-separated: per-command,saved-context,resident,plain,checkpoint (default: all)");
  sub->add_option("--iterations", o.iterations, "Samples per primitive and extends per strategy")
      ->check(CLI::Range(2, 1000000))
      ->capture_default_str();
  sub->add_option("--pcr", o.pcr, "PCR to extend (reset at the end); 0-15 need --force-pcr")
      ->check(CLI::Range(0, 31))
      ->capture_default_str();
  sub->add_flag("--force-pcr", o.force_pcr, "Allow PCRs 0-15 (they cannot be reset: the values stay changed)");
  sub->add_option("--checkpoint-every", o.checkpoint_every, "checkpoint strategy: audited read every N extends")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_flag("--no-primitives", o.no_primitives, "Skip the per-command measurements");
  sub->add_option("--budget-ms", o.budget_ms,
                  "Budget per protected PCR extend for the recommendation (as policy calibrate)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  o.floor.add_to(sub);
  sub->add_option("--policy", o.policy,
                  "Policy file whose decision for this TPM is printed beside the recommendation (default: "
                  "$TPMSEC_POLICY or data/policy/default.toml)");
  sub->add_option("--json", o.json, "Write the result as JSON (docs/bench-json.md)");
  sub->add_option("--csv", o.csv, "Write one CSV row per sample");
  sub->add_option("--trace", o.trace, "Write a Chrome trace-event JSON (opens in Perfetto)");
  sub->add_option("--svg", o.svg, "Write a chart of cost per extend by strategy, stacked by TPM command");
  sub->add_option("--openmetrics", o.openmetrics,
                  "Write per-strategy cost in the Prometheus text format (node_exporter textfile collector)");
  o.progress.add_to(sub);
}

// The run's options from the flags, checked before the TPM is opened.
Result<BenchOptions> bench_options(const BenchFlags& o) {
  TPMSEC_RETURN_IF_ERROR(check_outputs({o.json, o.csv, o.trace, o.svg, o.openmetrics}));
  if (o.pcr < 16 && !o.force_pcr) {
    return usage_error(fmt::format(
        "PCR {} holds boot measurements and cannot be reset: use a resettable PCR (16, the default, or 23) or "
        "--force-pcr",
        o.pcr));
  }
  BenchOptions options;
  options.iterations = o.iterations;
  options.pcr = o.pcr;
  options.checkpoint_every = o.checkpoint_every;
  // Measurement, not protection: the sessions time what a protected
  // extend costs and vouch for nothing, so the salt key is taken as the
  // TPM first answers (docs/threat-model.md, "Measurement commands").
  options.protection.trust_first_use = true;
  options.primitives = !o.no_primitives;
  options.budget_ms = o.budget_ms;
  options.floor = o.floor.floor();
  return options;
}

// The PCR checked and the resource manager's effect named, before the run.
Status check_bench_target(const BenchFlags& o, const MeasuredTpm& tpm) {
  // Before any command that would answer a raw TPM_RC_VALUE.
  TPMSEC_RETURN_IF_ERROR(check_pcr(tpm.info, alg::kSha256, o.pcr));
  if (const TpmSpec spec = tpm.base->spec();
      spec.kind == TpmKind::kDevice && spec.path.find("tpmrm") != std::string::npos) {
    fmt::print(stderr,
               "tpmsec: warning: through /dev/tpmrm0 the kernel's resource manager context-swaps sessions after "
               "every command, so 'resident' costs like 'saved-context'; using the TPM also makes the kernel "
               "rebuild its own HMAC session at its next extend\n");
  }
  return ok_status();
}

// The measurement on `tpm`, shown on `bar`; an interrupt stops it.
Result<BenchResult> measure_bench(MeasuredTpm& tpm, BenchOptions& options, ProgressBar& bar,
                                  const StopOnInterrupt& interrupt) {
  options.progress = [&bar](size_t done, size_t total, const std::string& what) { bar.update(done, total, what); };
  options.stop = interrupt.flag();
  auto result = run_bench(*tpm.tpm, tpm.log, *tpm.clock, tpm.info, options);
  bar.finish();
  if (!result.ok()) return result.error();
  result->tpm = tpm.identity;
  if (tpm.latency_profile) result->model = costs_from_profile(*tpm.latency_profile, options.checkpoint_every);
  return result;
}

Status write_bench_outputs(const BenchFlags& o, const BenchResult& result) {
  if (!o.json.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.json, bench_json(result).dump(2) + "\n"));
  if (!o.csv.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.csv, bench_csv(result)));
  if (!o.trace.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.trace, bench_trace(result).dump() + "\n"));
  if (!o.svg.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.svg, bench_svg(result)));
  return ok_status();
}

// The budget's recommendation and the policy's decision for this TPM.
// What `pcr extend` and `replay` would use here: the policy's decision
// for this TPM (its identity as read, unauthenticated: bench vouches
// for nothing). With the shipped policy it is the recommendation below
// for an emulated profile, decided by the same function from the
// profile's means. An interrupted run decides nothing (rate_strategies).
struct BenchDecisions {
  PolicyDecision policy;
  Calibration budget;
  bool recommends = false;
};

BenchDecisions decide_bench(const BenchFlags& o, const BenchResult& result, const Policy& policy,
                            const MeasuredTpm& tpm) {
  BenchDecisions d;
  TpmFacts facts = facts_of(tpm);
  d.policy = decide(policy, facts);
  d.budget = choose_strategy(strategy_costs(result), o.budget_ms, o.floor.floor());
  d.recommends = !result.interrupted && strategy_costs(result).per_extend_ms.count(d.budget.extend);
  return d;
}

Status write_bench_openmetrics(const BenchFlags& o, const BenchResult& result, const BenchDecisions& d) {
  std::vector<DecisionMetric> decisions;
  if (d.recommends) decisions.push_back({"budget", std::string(strategy_name(d.budget.extend))});
  if (!result.interrupted && d.policy.rule) {
    decisions.push_back({"policy", std::string(strategy_name(d.policy.extend))});
  }
  return write_file(o.openmetrics, openmetrics_text(result.tpm, result.transport, "bench", strategy_metrics(result),
                                                    !result.interrupted, o.budget_ms, decisions));
}

void print_bench_report(const BenchFlags& o, const BenchResult& result, const BenchDecisions& d, const Policy& policy) {
  std::FILE* report = report_stream({o.json, o.csv, o.trace, o.svg, o.openmetrics});
  fmt::print(report, "{}", bench_text(result));
  if (!result.interrupted && d.policy.rule) {
    fmt::print(report, "policy: {} ({}) — rule '{}' of {}\n", strategy_name(d.policy.extend),
               strategy_protection(d.policy.extend), d.policy.rule->name, policy.origin);
  }
  if (d.recommends && !prevents(d.budget.extend)) {
    fmt::print(
        stderr, "{}",
        weak_strategy_notice(d.budget.extend, fmt::format("bench's recommendation {}", floor_flag(o.floor.floor()))));
  }
}

Status run_bench_command(const BenchFlags& o) {
  TPMSEC_ASSIGN_OR_RETURN(BenchOptions options, bench_options(o));
  TPMSEC_ASSIGN_OR_RETURN(Policy policy, load_command_policy(o.policy));
  if (!o.strategies.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(options.strategies, parse_strategy_list(o.strategies));
  }
  TPMSEC_ASSIGN_OR_RETURN(auto measured, open_measured_tpm(o.tpm));
  MeasuredTpm& tpm = *measured;
  TPMSEC_RETURN_IF_ERROR(check_bench_target(o, tpm));
  // Both live to the end: an interrupt while the results are written sets the flag, as during the run.
  ProgressBar bar(o.progress.enabled(), tpm.clock);
  StopOnInterrupt interrupt;
  TPMSEC_ASSIGN_OR_RETURN(BenchResult result, measure_bench(tpm, options, bar, interrupt));
  TPMSEC_RETURN_IF_ERROR(write_bench_outputs(o, result));
  BenchDecisions d = decide_bench(o, result, policy, tpm);
  if (!o.openmetrics.empty()) TPMSEC_RETURN_IF_ERROR(write_bench_openmetrics(o, result, d));
  print_bench_report(o, result, d, policy);
  if (result.interrupted) return runtime_error("interrupted: partial results above; PCR reset, handles flushed");
  return ok_status();
}

}  // namespace

void register_bench(CLI::App& app, Action* action) {
  auto o = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Measure what bus protection costs on this TPM: every command the strategies use, and each lifecycle "
      "strategy per protected PCR extend");
  add_bench_flags(sub, *o);
  sub->callback([o, action] { *action = [o]() { return run_bench_command(*o); }; });
}

}  // namespace tpmsec::cli
