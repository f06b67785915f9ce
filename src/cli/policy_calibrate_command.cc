// tpmsec policy calibrate|derive: policies from measurements.
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "cli.h"
#include "floor_flags.h"
#include "policy_command.h"
#include "progress.h"
#include "protection_options.h"
#include "tpmsec/calibration/calibration.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/measure/openmetrics.h"
#include "tpmsec/policy/policy.h"

namespace tpmsec::cli {
namespace {

// With `model` (an emulated TPM's profile), each strategy's modelled figure
// and range next to the measured cost.
void print_costs(const Calibration& c, const StrategyCosts* model, std::FILE* out = stdout) {
  const int width = model ? 24 : 0;  // the fits column, padded only when a model column follows
  fmt::print(out, "{:<16}{:<12}{:>12}  {:<{}}{}\n", "strategy", "protection", "ms/extend", "fits", width,
             model ? "modelled (low-high, share from E values)" : "");
  for (const auto& cand : c.candidates) {
    std::string fits = std::string(cand.fits ? "yes" : "no") + (cand.allowed ? "" : " (below the floor)");
    fmt::print(out, "{:<16}{:<12}{:>12.3f}  {:<{}}{}\n", strategy_name(cand.kind), strategy_protection(cand.kind),
               cand.ms, fits, width, model && cost_range(*model, cand.kind) ? cost_text(*model, cand.kind) : "");
  }
}

// Raises flag() after `seconds` of real time, or as soon as `also` is raised (Ctrl-C).
class Deadline {
 public:
  Deadline(double seconds, const std::atomic<bool>* also)
      : thread_(
            [this,
             end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                          std::chrono::duration<double>(seconds)),
             also] {
              // Wake at the deadline itself (not on the next 50 ms poll, which a
              // short limit would never reach), and every 50 ms for a signal.
              std::unique_lock<std::mutex> lock(mu_);
              while (!done_ && !expired_) {
                cv_.wait_until(lock, std::min(end, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
                if (std::chrono::steady_clock::now() >= end || also->load()) expired_ = true;
              }
            }) {}
  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  const std::atomic<bool>* flag() const { return &expired_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> expired_{false};
  std::thread thread_;
};

struct CalibrateFlags {
  TpmOption tpm;
  FloorFlags floor;
  double budget_ms = kDefaultBudgetMs;
  double max_seconds = 30;
  int iterations = 12;
  uint32_t pcr = 16;
  std::string openmetrics;
  ProgressFlags progress;
};

void add_calibrate_flags(CLI::App* sub, CalibrateFlags& o) {
  o.tpm.add_to(sub, /*state_changing=*/true);
  o.floor.add_to(sub);
  sub->add_option("--budget-ms", o.budget_ms, "Budget per protected PCR extend, ms (steady state)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--max-seconds", o.max_seconds, "Stop measuring after this much real time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--iterations", o.iterations, "Extends per strategy (the first is reported apart)")
      ->check(CLI::Range(2, 10000))
      ->capture_default_str();
  sub->add_option("--pcr", o.pcr, "Resettable PCR to extend (reset at the end)")
      ->check(CLI::IsMember({16, 23}))
      ->capture_default_str();
  sub->add_option("--openmetrics", o.openmetrics,
                  "Write each strategy's measured cost in the Prometheus text format (node_exporter textfile "
                  "collector), also when the run stops early");
  o.progress.add_to(sub);
}

BenchOptions calibrate_bench_options(const CalibrateFlags& o) {
  BenchOptions options;
  options.iterations = o.iterations;
  options.pcr = o.pcr;
  options.primitives = false;
  // Measurement, not protection: the sessions time what a protected
  // extend costs and vouch for nothing, so the salt key is taken as the
  // TPM first answers (docs/threat-model.md, "Measurement commands").
  options.protection.trust_first_use = true;
  // Cheapest first: a run cut short by --max-seconds still has the cheap ones.
  options.strategies = {StrategyKind::kPlain, StrategyKind::kCheckpoint, StrategyKind::kResident,
                        StrategyKind::kSavedContext, StrategyKind::kPerCommand};
  return options;
}

// A decision compares every strategy: one from a partial run could pick
// a strategy only because a better one was never measured. The strategies
// of `options` that `result` has not measured `iterations` times.
std::vector<std::string> missing_strategies(const BenchOptions& options, const BenchResult& result, int iterations) {
  std::vector<std::string> missing;
  for (StrategyKind k : options.strategies) {
    bool measured = std::any_of(result.strategies.begin(), result.strategies.end(), [&](const StrategyResult& s) {
      return s.kind == k && s.extends.size() >= static_cast<size_t>(iterations);
    });
    if (!measured) missing.emplace_back(strategy_name(k));
  }
  return missing;
}

// The decision and its budget are exported only from a complete run.
Status write_calibrate_openmetrics(const CalibrateFlags& o, const BenchResult& result, bool complete,
                                   const std::optional<Calibration>& decided) {
  std::vector<DecisionMetric> decisions;
  if (decided) decisions.push_back({"budget", std::string(strategy_name(decided->extend))});
  return write_file(o.openmetrics,
                    openmetrics_text(result.tpm, result.transport, "policy calibrate", strategy_metrics(result),
                                     complete, decided ? o.budget_ms : 0.0, decisions));
}

// The measured costs, the decision and why, and the policy rule that makes it.
void print_calibration(std::FILE* out, const CalibrateFlags& o, const MeasuredTpm& tpm, const Calibration& c,
                       double seconds, uint32_t checkpoint_every, const std::string& source) {
  TpmFacts facts = facts_of(tpm);
  fmt::print(out, "TPM         {}\n", identity_line(facts));
  fmt::print(out, "measured    {} extends per strategy in {:.2f} s of real time{}\n", o.iterations, seconds,
             tpm.clock->is_virtual() ? " (virtual clock)" : "");
  fmt::print(out, "budget      {:.2f} ms per extend\n\n", o.budget_ms);
  std::optional<StrategyCosts> model;
  if (tpm.latency_profile) model = costs_from_profile(*tpm.latency_profile, checkpoint_every);
  print_costs(c, model ? &*model : nullptr, out);
  fmt::print(out, "\ndecision    PCR extends: {} ({}); other protected commands: {}\n", strategy_name(c.extend),
             strategy_protection(c.extend), strategy_name(c.other));
  fmt::print(out, "why         {}\n", c.reason);
  std::vector<std::string> notes;
  if (model) notes = uncertainty_notes(c.extend, *model, o.budget_ms, o.floor.floor());
  for (const std::string& note : notes) fmt::print(out, "{:<12}{}\n", "caution", note);
  if (!prevents(c.extend)) fmt::print(out, "gives up    {}\n", strategy_gives_up(c.extend));
  fmt::print(out, "linux       {}\n\n", linux_equivalent(c.extend));
  std::string name = facts.vendor.empty() ? facts.manufacturer : facts.manufacturer + "-" + facts.vendor;
  fmt::print(out, "# Policy rule (paste above the default rule of your policy file):\n");
  if (!prevents(c.extend)) {
    fmt::print(out, "# BELOW PREVENTION: {}: {}.\n# It {}.\n", strategy_name(c.extend), strategy_gives_up(c.extend),
               kWhenLowering);
    fmt::print(stderr, "{}", weak_strategy_notice(c.extend, fmt::format("calibrate {}", floor_flag(o.floor.floor()))));
  }
  for (const std::string& note : notes) fmt::print(out, "# {}\n", note);
  fmt::print(out, "{}", to_toml(rule_for(name.empty() ? "this-tpm" : name, facts, c, source)));
}

Status run_calibrate(const CalibrateFlags& o) {
  TPMSEC_RETURN_IF_ERROR(check_outputs({o.openmetrics}));
  std::FILE* out = report_stream({o.openmetrics});
  TPMSEC_ASSIGN_OR_RETURN(auto tpm, open_measured_tpm(o.tpm));
  BenchOptions options = calibrate_bench_options(o);
  ProgressBar bar(o.progress.enabled(), tpm->clock);
  options.progress = [&bar](size_t done, size_t total, const std::string& what) { bar.update(done, total, what); };
  StopOnInterrupt interrupt;
  Deadline deadline(o.max_seconds, interrupt.flag());
  options.stop = deadline.flag();
  auto started = std::chrono::steady_clock::now();
  auto result = run_bench(*tpm->tpm, tpm->log, *tpm->clock, tpm->info, options);
  bar.finish();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!result.ok()) return result.error();
  result->tpm = tpm->identity;
  std::string source =
      fmt::format("tpmsec policy calibrate --budget-ms {} on {}, {}", o.budget_ms,
                  tpm->profile.empty() ? tpm->base->describe() : "--emulate " + tpm->profile, result->date);
  std::vector<std::string> missing = missing_strategies(options, *result, o.iterations);
  StrategyCosts costs = costs_from_bench(*result, source);
  const bool complete = !result->interrupted && missing.empty();
  std::optional<Calibration> decided;
  if (complete && !costs.per_extend_ms.empty()) decided = choose_strategy(costs, o.budget_ms, o.floor.floor());
  if (!o.openmetrics.empty()) TPMSEC_RETURN_IF_ERROR(write_calibrate_openmetrics(o, *result, complete, decided));
  if (costs.per_extend_ms.empty()) return runtime_error("calibration measured nothing (raise --max-seconds)");
  if (result->interrupted || !missing.empty()) {
    return runtime_error(fmt::format(
        "calibration stopped early (--max-seconds {} or a signal); not fully measured: {}. No decision and no "
        "rule from a partial run: raise --max-seconds or lower --iterations",
        o.max_seconds,
        missing.empty() ? std::string("the last strategy") : fmt::format("{}", fmt::join(missing, ", "))));
  }
  print_calibration(out, o, *tpm, *decided, seconds, options.checkpoint_every, source);
  return ok_status();
}

}  // namespace

void register_calibrate(CLI::App* policy, Action* action) {
  auto o = std::make_shared<CalibrateFlags>();
  CLI::App* sub = policy->add_subcommand(
      "calibrate",
      "Measure each strategy briefly and pick the most protective one whose cost per extend fits the budget (never "
      "below prevention unless --allow-detection or --allow-plain)");
  add_calibrate_flags(sub, *o);
  sub->callback([o, action] { *action = [o]() { return run_calibrate(*o); }; });
}

void register_derive(CLI::App* policy, Action* action) {
  struct Options {
    std::string profiles = "all";
    double budget_ms = kDefaultBudgetMs;
    FloorFlags floor;
    std::string output;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      policy->add_subcommand("derive",
                             "Write a policy with a rule per latency profile, decided from the profile's figures (how "
                             "data/policy/default.toml was made)");
  sub->add_option("--profiles", o->profiles, "all, or comma-separated profile names or paths")->capture_default_str();
  sub->add_option("--budget-ms", o->budget_ms, "Budget per protected PCR extend, ms")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  o->floor.add_to(sub);
  sub->add_option("-o,--output", o->output, "Write the policy here (default: standard output)");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->output}));
      TPMSEC_ASSIGN_OR_RETURN(std::vector<LatencyProfile> profiles, as_input(load_profiles(o->profiles)));
      ProtectionFloor floor = o->floor.floor();
      std::string command = fmt::format("tpmsec policy derive --budget-ms {} --profiles {}{}", o->budget_ms,
                                        o->profiles, floor == ProtectionFloor::kPrevention ? "" : " ");
      command += floor_flag(floor);
      TPMSEC_ASSIGN_OR_RETURN(std::string text, derive_policy(profiles, o->budget_ms, command, floor));
      if (floor != ProtectionFloor::kPrevention) {
        fmt::print(stderr,
                   "tpmsec: this policy may choose below prevention: use it as a policy file of your own; a "
                   "rule below prevention {}\n",
                   kWhenLowering);
      }
      if (o->output.empty()) {
        fmt::print("{}", text);
        return ok_status();
      }
      return write_file(o->output, text);
    };
  });
}

}  // namespace tpmsec::cli
