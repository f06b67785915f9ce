// tpmsec policy show|check|calibrate|derive: which strategy for which TPM.
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "cli.h"
#include "floor_flags.h"
#include "progress.h"
#include "protection_options.h"
#include "tpmsec/calibration.h"
#include "tpmsec/openmetrics.h"
#include "tpmsec/policy.h"

namespace tpmsec::cli {
namespace {

std::string identity_line(const TpmFacts& f) {
  std::string s = fmt::format("manufacturer \"{}\", vendor \"{}\", firmware {}", f.manufacturer, f.vendor,
                              f.firmware.empty() ? "unknown" : f.firmware);
  if (f.emulated) s += fmt::format(" (emulated: profile {})", f.profile);
  return s;
}

std::string measured_line(const TpmFacts& f) {
  if (f.measured.empty()) return "none (rules with 'when' need --measurements, --emulate or a calibration)";
  std::vector<std::string> parts;
  for (const auto& [k, v] : f.measured) parts.push_back(fmt::format("{} {:.2f}", k, v));
  return fmt::format("{}\n{:<12}from {} ({})", fmt::join(parts, ", "), "", f.measured_source,
                     fact_origin_text(f.measured_origin));
}

// The operator's --allow-detection / --allow-plain for calibrate and derive.

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

// The profile a decision's figures come from: the emulated one, else the
// shipped profile a derived rule cites ("profile ID (NAME): ..." in its
// source, as `policy derive` writes it).
std::optional<LatencyProfile> decision_profile(const OpenTpm& open, const PolicyRule& rule) {
  // Emulating: the profile itself. Otherwise (the plain path measures
  // nothing) the profile a shipped rule was derived from, if any.
  if (open.measured && open.measured->latency_profile) return open.measured->latency_profile;
  constexpr std::string_view kPrefix = "profile ";
  if (rule.source.rfind(kPrefix, 0) != 0) return std::nullopt;
  std::string id = rule.source.substr(kPrefix.size());
  id = id.substr(0, id.find(' '));
  if (id.empty() || id != rule.name) return std::nullopt;
  auto p = load_profile(id);
  if (!p.ok()) return std::nullopt;
  return *p;
}

// How a rule below prevention takes effect, for those who paste or check one.
constexpr std::string_view kWhenLowering =
    "takes effect only from a policy file you choose (--policy FILE or $TPMSEC_POLICY), on a TPM identity read "
    "through an audited session salted to a trusted key, and on bus timings only with trust_timings = true";

// Raises flag() after `seconds` of real time, or as soon as `also` is raised (Ctrl-C).
class Deadline {
 public:
  Deadline(double seconds, const std::atomic<bool>* also)
      : thread_([this, end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
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

void register_show(CLI::App* policy, Action* action) {
  struct Options {
    TpmOption tpm;
    ProtectionOptions protection;
    std::string policy;
    std::string measurements;
    double budget_ms = 20;
    uint32_t boot_extends = 12313;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = policy->add_subcommand("show", "The TPM's identity, the rule that matches it, the decision and why");
  o->tpm.add_to(sub);
  o->protection.add_to(sub);
  sub->add_option("--policy", o->policy, "Policy file (default: $TPMSEC_POLICY or data/policy/default.toml)");
  sub->add_option("--measurements", o->measurements,
                  "A `tpmsec bench --json` result of this TPM, for rules that test measured properties");
  sub->add_option("--budget-ms", o->budget_ms,
                  "TPM time per extend above which prevention counts as over budget, and detection (`tpmsec "
                  "verify` on a timer, plain extends) is offered with each choice's boot time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--boot-extends", o->boot_extends,
                  "PCR extends of one boot for those boot times (default: the LKML thread's IMA boot on an SLB9670)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_ASSIGN_OR_RETURN(Policy p, load_command_policy(o->policy));
      std::optional<StrategyCosts> measured;
      if (!o->measurements.empty()) {
        TPMSEC_ASSIGN_OR_RETURN(nlohmann::json j, read_json_file(o->measurements));
        TPMSEC_ASSIGN_OR_RETURN(measured, costs_from_bench_json(j, o->measurements));
      }
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_tpm(o->tpm));
      TPMSEC_ASSIGN_OR_RETURN(ProtectionConfig protection, o->protection.config(open.transport(), open.info(), SymDef::aes128_cfb()));
      TpmFacts facts = open.facts();
      if (measured) {
        // Timed over whatever bus the bench ran on: an interposer can inflate them.
        facts.measured = measured_properties(*measured);
        facts.measured_source = measured->source;
        facts.measured_origin = FactOrigin::kUnauthenticated;
      }
      TPMSEC_ASSIGN_OR_RETURN(PolicyDecision d, decide_on_tpm(p, facts, open.tpm(), protection, &open.info()));
      fmt::print("{:<12}{} ({} rules; {})\n", "policy", p.origin, p.rules.size(),
                 p.operator_chosen ? "chosen by the operator" : "the shipped default");
      fmt::print("{:<12}{} ({})\n", "TPM", identity_line(facts), fact_origin_text(facts.identity_origin));
      fmt::print("{:<12}{}\n", "measured", measured_line(facts));
      fmt::print("rules\n");
      for (const RuleVerdict& v : d.verdicts) {
        fmt::print("  {:<28} line {:<4} {}\n", v.rule->name, v.rule->line,
                   v.matched ? "MATCHES" : "no: " + v.why);
      }
      if (!d.rule) return runtime_error("no rule matched (a valid policy ends with a default rule)");
      fmt::print("{:<12}PCR extends: {} ({}); other protected commands: {}\n", "decision", strategy_name(d.extend),
                 strategy_protection(d.extend), strategy_name(d.other));
      if (d.lifted_extend || d.lifted_other) {
        fmt::print("{:<12}the rule chose {} for extends and {} for other commands, but {}; kept {} ({})\n", "floor",
                   strategy_name(d.lifted_extend.value_or(d.extend)), strategy_name(d.lifted_other.value_or(d.other)),
                   d.floor_reason, strategy_name(d.lifted_extend ? d.extend : d.other), d.fallback_reason);
      }
      fmt::print("{:<12}{}\n", "reason", d.rule->reason);
      fmt::print("{:<12}null key {}, checkpoint every {}{}; cost only (docs/policy.md, \"Session tuning\")\n",
                 "sessions", null_key_load_name(d.tuning.null_key), d.tuning.checkpoint_every,
                 d.rule->null_key || d.rule->checkpoint_every ? "" : ": the defaults, the rule says nothing");
      std::optional<StrategyCosts> boot_model;  // the profile's costs, for the detection line's boot times
      if (std::optional<LatencyProfile> profile = decision_profile(open, *d.rule)) {
        StrategyCosts model = costs_from_profile(*profile);
        boot_model = model;
        std::vector<std::string> figures;
        for (StrategyKind k : all_strategies()) {
          if (cost_range(model, k)) figures.push_back(fmt::format("{} {}", strategy_name(k), cost_text(model, k)));
        }
        fmt::print("{:<12}profile {} per extend, low-high from each value's uncertainty (docs/latency-profiles.md, "
                   "\"Uncertainty\"):\n{:<12}{}\n",
                   "figures", profile->id, "", fmt::join(figures, ", "));
        // No budget here: the rule's decision is given, the ranges say how firm it is.
        for (const std::string& note : uncertainty_notes(
                 d.extend, model, 0, prevents(d.extend) ? ProtectionFloor::kPrevention : ProtectionFloor::kNone)) {
          fmt::print("{:<12}{}\n", "caution", note);
        }
      }
      // The cheapest preventing strategy's cost, where the profile gives one.
      std::optional<double> prevention_ms;
      if (boot_model) {
        for (const auto& [kind, ms] : boot_model->per_extend_ms) {
          if (prevents(kind) && (!prevention_ms || ms < *prevention_ms)) prevention_ms = ms;
        }
      }
      if (!prevents(d.extend) || d.lifted_extend || (prevention_ms && *prevention_ms > o->budget_ms)) {
        // Where prevention is over budget, detection at plain cost remains:
        // checking the PCRs against the logs after the fact.
        std::string boot;
        if (boot_model) {
          std::vector<std::string> choices;
          auto add = [&](StrategyKind kind, const std::string& label) {
            auto it = boot_model->per_extend_ms.find(kind);
            if (it == boot_model->per_extend_ms.end()) return;
            choices.push_back(fmt::format("{} {:.0f} s", label, it->second * o->boot_extends / 1000));
          };
          add(d.extend, fmt::format("{} (the decision)", strategy_name(d.extend)));
          for (StrategyKind k : all_strategies()) {
            if (k != d.extend && k != StrategyKind::kPlain && prevents(k)) add(k, std::string(strategy_name(k)));
          }
          add(StrategyKind::kPlain, "plain extends + verify on a timer");
          boot = fmt::format("; TPM time of a boot of {} extends: {}", o->boot_extends, fmt::join(choices, ", "));
        }
        fmt::print("{:<12}prevention is over budget ({}): `tpmsec verify --eventlog "
                   "/sys/kernel/security/tpm0/binary_bios_measurements --ima "
                   "/sys/kernel/security/ima/ascii_runtime_measurements --tpm device:/dev/tpmrm0` on a timer "
                   "detects a tampered extend (exit 3) at plain extend cost{}; `tpmsec predict --ima LOG` for "
                   "a boot's own log (docs/replay.md)\n",
                   "detection",
                   prevention_ms && *prevention_ms > o->budget_ms
                       ? fmt::format("{:.2f} ms per extend at best, {:.1f} ms budget", *prevention_ms, o->budget_ms)
                       : std::string("the rule chose below it"),
                   boot);
      }
      fmt::print("{:<12}{}\n", "source", d.rule->source.empty() ? "(none given)" : d.rule->source);
      fmt::print("{:<12}{}\n", "rests on", fmt::join(d.rests_on, "; "));
      fmt::print("{:<12}{}\n", "linux", linux_equivalent(d.extend));
      fmt::print(stderr, "{}",
                 weak_strategy_notice(d.extend, fmt::format("policy {} rule '{}'", p.origin, d.rule->name)));
      return ok_status();
    };
  });
}

void register_check(CLI::App* policy, Action* action) {
  auto file = std::make_shared<std::string>();
  CLI::App* sub = policy->add_subcommand("check", "Validate a policy file: syntax, keys, strategies, unreachable rules");
  sub->add_option("FILE", *file, "Policy file")->required();
  sub->callback([file, action] {
    *action = [file]() -> Status {
      TPMSEC_ASSIGN_OR_RETURN(Policy p, load_policy(*file));
      fmt::print("{}: {} rules, valid; the last, '{}', is the default\n", p.origin, p.rules.size(),
                 p.rules.back().name);
      bool lowering = false;
      for (const PolicyRule& r : p.rules) {
        std::string who = fmt::format("rule '{}' (line {})", r.name, r.line);
        fmt::print(stderr, "{}", weak_strategy_notice(r.extend, who));
        if (!prevents(r.other)) fmt::print(stderr, "{}", weak_strategy_notice(r.other, who + ", other commands"));
        lowering |= r.lowers_protection();
      }
      if (lowering) fmt::print(stderr, "tpmsec: a rule below prevention {}\n", kWhenLowering);
      return ok_status();
    };
  });
}

void register_calibrate(CLI::App* policy, Action* action) {
  struct Options {
    TpmOption tpm;
    FloorFlags floor;
    double budget_ms = kDefaultBudgetMs;
    double max_seconds = 30;
    int iterations = 12;
    uint32_t pcr = 16;
    std::string openmetrics;
    ProgressFlags progress;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = policy->add_subcommand(
      "calibrate",
      "Measure each strategy briefly and pick the most protective one whose cost per extend fits the budget (never "
      "below prevention unless --allow-detection or --allow-plain)");
  o->tpm.add_to(sub, /*state_changing=*/true);
  o->floor.add_to(sub);
  sub->add_option("--budget-ms", o->budget_ms, "Budget per protected PCR extend, ms (steady state)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--max-seconds", o->max_seconds, "Stop measuring after this much real time")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--iterations", o->iterations, "Extends per strategy (the first is reported apart)")
      ->check(CLI::Range(2, 10000))
      ->capture_default_str();
  sub->add_option("--pcr", o->pcr, "Resettable PCR to extend (reset at the end)")
      ->check(CLI::IsMember({16, 23}))
      ->capture_default_str();
  sub->add_option("--openmetrics", o->openmetrics,
                  "Write each strategy's measured cost in the Prometheus text format (node_exporter textfile "
                  "collector), also when the run stops early");
  o->progress.add_to(sub);
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->openmetrics}));
      std::FILE* out = report_stream({o->openmetrics});
      TPMSEC_ASSIGN_OR_RETURN(auto tpm, open_measured_tpm(o->tpm));
      BenchOptions options;
      options.iterations = o->iterations;
      options.pcr = o->pcr;
      options.primitives = false;
      // Measurement, not protection: the sessions time what a protected
      // extend costs and vouch for nothing, so the salt key is taken as the
      // TPM first answers (docs/threat-model.md, "Measurement commands").
      options.protection.trust_first_use = true;
      // Cheapest first: a run cut short by --max-seconds still has the cheap ones.
      options.strategies = {StrategyKind::kPlain, StrategyKind::kCheckpoint, StrategyKind::kResident,
                            StrategyKind::kSavedContext, StrategyKind::kPerCommand};
      ProgressBar bar(o->progress.enabled(), tpm->clock);
      options.progress = [&bar](size_t done, size_t total, const std::string& what) { bar.update(done, total, what); };
      StopOnInterrupt interrupt;
      Deadline deadline(o->max_seconds, interrupt.flag());
      options.stop = deadline.flag();
      auto started = std::chrono::steady_clock::now();
      auto result = run_bench(*tpm->tpm, tpm->log, *tpm->clock, tpm->info, options);
      bar.finish();
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (!result.ok()) return result.error();
      result->tpm = tpm->identity;
      std::string source = fmt::format("tpmsec policy calibrate --budget-ms {} on {}, {}", o->budget_ms,
                                       tpm->profile.empty() ? tpm->base->describe() : "--emulate " + tpm->profile,
                                       result->date);
      // A decision compares every strategy: one from a partial run could pick
      // a strategy only because a better one was never measured.
      std::vector<std::string> missing;
      for (StrategyKind k : options.strategies) {
        bool measured = std::any_of(result->strategies.begin(), result->strategies.end(), [&](const StrategyResult& s) {
          return s.kind == k && s.extends.size() >= static_cast<size_t>(o->iterations);
        });
        if (!measured) missing.emplace_back(strategy_name(k));
      }
      StrategyCosts costs = costs_from_bench(*result, source);
      const bool complete = !result->interrupted && missing.empty();
      // The decision and its budget are exported only from a complete run.
      std::optional<Calibration> decided;
      if (complete && !costs.per_extend_ms.empty()) decided = choose_strategy(costs, o->budget_ms, o->floor.floor());
      if (!o->openmetrics.empty()) {
        std::vector<DecisionMetric> decisions;
        if (decided) decisions.push_back({"budget", std::string(strategy_name(decided->extend))});
        TPMSEC_RETURN_IF_ERROR(write_file(o->openmetrics,
                                          openmetrics_text(result->tpm, result->transport, "policy calibrate",
                                                           strategy_metrics(*result), complete,
                                                           decided ? o->budget_ms : 0.0, decisions)));
      }
      if (costs.per_extend_ms.empty()) return runtime_error("calibration measured nothing (raise --max-seconds)");
      if (result->interrupted || !missing.empty()) {
        return runtime_error(fmt::format(
            "calibration stopped early (--max-seconds {} or a signal); not fully measured: {}. No decision and no "
            "rule from a partial run: raise --max-seconds or lower --iterations",
            o->max_seconds, missing.empty() ? std::string("the last strategy") : fmt::format("{}", fmt::join(missing, ", "))));
      }
      const Calibration& c = *decided;
      TpmFacts facts = facts_of(*tpm);
      fmt::print(out, "TPM         {}\n", identity_line(facts));
      fmt::print(out, "measured    {} extends per strategy in {:.2f} s of real time{}\n", o->iterations, seconds,
                 tpm->clock->is_virtual() ? " (virtual clock)" : "");
      fmt::print(out, "budget      {:.2f} ms per extend\n\n", o->budget_ms);
      std::optional<StrategyCosts> model;
      if (tpm->latency_profile) model = costs_from_profile(*tpm->latency_profile, options.checkpoint_every);
      print_costs(c, model ? &*model : nullptr, out);
      fmt::print(out, "\ndecision    PCR extends: {} ({}); other protected commands: {}\n", strategy_name(c.extend),
                 strategy_protection(c.extend), strategy_name(c.other));
      fmt::print(out, "why         {}\n", c.reason);
      std::vector<std::string> notes;
      if (model) notes = uncertainty_notes(c.extend, *model, o->budget_ms, o->floor.floor());
      for (const std::string& note : notes) fmt::print(out, "{:<12}{}\n", "caution", note);
      if (!prevents(c.extend)) fmt::print(out, "gives up    {}\n", strategy_gives_up(c.extend));
      fmt::print(out, "linux       {}\n\n", linux_equivalent(c.extend));
      std::string name = facts.vendor.empty() ? facts.manufacturer : facts.manufacturer + "-" + facts.vendor;
      fmt::print(out, "# Policy rule (paste above the default rule of your policy file):\n");
      if (!prevents(c.extend)) {
        fmt::print(out, "# BELOW PREVENTION: {}: {}.\n# It {}.\n", strategy_name(c.extend), strategy_gives_up(c.extend),
                   kWhenLowering);
        fmt::print(stderr, "{}",
                   weak_strategy_notice(c.extend, fmt::format("calibrate {}", floor_flag(o->floor.floor()))));
      }
      for (const std::string& note : notes) fmt::print(out, "# {}\n", note);
      fmt::print(out, "{}", to_toml(rule_for(name.empty() ? "this-tpm" : name, facts, c, source)));
      return ok_status();
    };
  });
}

void register_derive(CLI::App* policy, Action* action) {
  struct Options {
    std::string profiles = "all";
    double budget_ms = kDefaultBudgetMs;
    FloorFlags floor;
    std::string output;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = policy->add_subcommand(
      "derive", "Write a policy with a rule per latency profile, decided from the profile's figures (how "
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
        fmt::print(stderr, "tpmsec: this policy may choose below prevention: use it as a policy file of your own; a "
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

}  // namespace

void register_policy(CLI::App& app, Action* action) {
  CLI::App* policy = app.add_subcommand("policy", "Per-TPM policy: which session strategy protects which TPM");
  policy->require_subcommand(1);
  register_show(policy, action);
  register_check(policy, action);
  register_calibrate(policy, action);
  register_derive(policy, action);
}

}  // namespace tpmsec::cli
