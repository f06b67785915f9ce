// tpmsec policy show|check: which strategy for which TPM (calibrate and derive:
// policy_calibrate_command.cc).
#include <fmt/format.h>

#include <optional>

#include "cli.h"
#include "policy_command.h"
#include "protection_options.h"
#include "strategy_option.h"
#include "tpmsec/calibration/calibration.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/policy/policy.h"
#include "tpmsec/protect.h"

namespace tpmsec::cli {

std::string identity_line(const TpmFacts& f) {
  std::string s = fmt::format("manufacturer \"{}\", vendor \"{}\", firmware {}", f.manufacturer, f.vendor,
                              f.firmware.empty() ? "unknown" : f.firmware);
  if (f.emulated) s += fmt::format(" (emulated: profile {})", f.profile);
  return s;
}

// How a rule below prevention takes effect, for those who paste or check one.
const std::string_view kWhenLowering =
    "takes effect only from a policy file you choose (--policy FILE or $TPMSEC_POLICY), on a TPM identity read "
    "through an audited session salted to a trusted key, and on bus timings only with trust_timings = true";

namespace {

std::string measured_line(const TpmFacts& f) {
  if (f.measured.empty()) return "none (rules with 'when' need --measurements, --emulate or a calibration)";
  std::vector<std::string> parts;
  for (const auto& [k, v] : f.measured) parts.push_back(fmt::format("{} {:.2f}", k, v));
  return fmt::format("{}\n{:<12}from {} ({})", fmt::join(parts, ", "), "", f.measured_source,
                     fact_origin_text(f.measured_origin));
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

struct ShowOptions {
  TpmOption tpm;
  ProtectionOptions protection;
  std::string policy;
  std::string measurements;
  double budget_ms = 20;
  uint32_t boot_extends = 12313;
};

// The policy, the TPM, every rule's verdict and the decision.
Status print_decision(const PolicyView& v) {
  const Policy& p = v.policy;
  const PolicyDecision& d = v.decision;
  fmt::print("{:<12}{} ({} rules; {})\n", "policy", p.origin, p.rules.size(),
             p.operator_chosen ? "chosen by the operator" : "the shipped default");
  fmt::print("{:<12}{} ({})\n", "TPM", identity_line(v.facts), fact_origin_text(v.facts.identity_origin));
  fmt::print("{:<12}{}\n", "measured", measured_line(v.facts));
  fmt::print("rules\n");
  for (const RuleVerdict& verdict : d.verdicts) {
    fmt::print("  {:<28} line {:<4} {}\n", verdict.rule->name, verdict.rule->line,
               verdict.matched ? "MATCHES" : "no: " + verdict.why);
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
  fmt::print("{:<12}null key {}, checkpoint every {}{}; cost only (docs/policy.md, \"Session tuning\")\n", "sessions",
             null_key_load_name(d.tuning.null_key), d.tuning.checkpoint_every,
             d.rule->null_key || d.rule->checkpoint_every ? "" : ": the defaults, the rule says nothing");
  return ok_status();
}

// The figures of the profile the decision's costs come from, if any; its
// costs, for the detection line's boot times.
std::optional<StrategyCosts> print_figures(const OpenTpm& open, const PolicyDecision& d) {
  std::optional<LatencyProfile> profile = decision_profile(open, *d.rule);
  if (!profile) return std::nullopt;
  StrategyCosts model = costs_from_profile(*profile);
  std::vector<std::string> figures;
  for (StrategyKind k : all_strategies()) {
    if (cost_range(model, k)) figures.push_back(fmt::format("{} {}", strategy_name(k), cost_text(model, k)));
  }
  fmt::print(
      "{:<12}profile {} per extend, low-high from each value's uncertainty (docs/latency-profiles.md, "
      "\"Uncertainty\"):\n{:<12}{}\n",
      "figures", profile->id, "", fmt::join(figures, ", "));
  // No budget here: the rule's decision is given, the ranges say how firm it is.
  for (const std::string& note : uncertainty_notes(
           d.extend, model, 0, prevents(d.extend) ? ProtectionFloor::kPrevention : ProtectionFloor::kNone)) {
    fmt::print("{:<12}{}\n", "caution", note);
  }
  return model;
}

// Where prevention is over budget, detection at plain cost remains:
// checking the PCRs against the logs after the fact.
void print_detection(const PolicyDecision& d, const std::optional<StrategyCosts>& boot_model, const ShowOptions& o) {
  // The cheapest preventing strategy's cost, where the profile gives one.
  std::optional<double> prevention_ms;
  if (boot_model) {
    for (const auto& [kind, ms] : boot_model->per_extend_ms) {
      if (prevents(kind) && (!prevention_ms || ms < *prevention_ms)) prevention_ms = ms;
    }
  }
  if (prevents(d.extend) && !d.lifted_extend && !(prevention_ms && *prevention_ms > o.budget_ms)) return;
  std::string boot;
  if (boot_model) {
    std::vector<std::string> choices;
    auto add = [&](StrategyKind kind, const std::string& label) {
      auto it = boot_model->per_extend_ms.find(kind);
      if (it == boot_model->per_extend_ms.end()) return;
      choices.push_back(fmt::format("{} {:.0f} s", label, it->second * o.boot_extends / 1000));
    };
    add(d.extend, fmt::format("{} (the decision)", strategy_name(d.extend)));
    for (StrategyKind k : all_strategies()) {
      if (k != d.extend && k != StrategyKind::kPlain && prevents(k)) add(k, std::string(strategy_name(k)));
    }
    add(StrategyKind::kPlain, "plain extends + verify on a timer");
    boot = fmt::format("; TPM time of a boot of {} extends: {}", o.boot_extends, fmt::join(choices, ", "));
  }
  fmt::print(
      "{:<12}prevention is over budget ({}): `tpmsec verify --eventlog "
      "/sys/kernel/security/tpm0/binary_bios_measurements --ima "
      "/sys/kernel/security/ima/ascii_runtime_measurements --tpm device:/dev/tpmrm0` on a timer "
      "detects a tampered extend (exit 3) at plain extend cost{}; `tpmsec predict --ima LOG` for "
      "a boot's own log (docs/replay.md)\n",
      "detection",
      prevention_ms && *prevention_ms > o.budget_ms
          ? fmt::format("{:.2f} ms per extend at best, {:.1f} ms budget", *prevention_ms, o.budget_ms)
          : std::string("the rule chose below it"),
      boot);
}

// The decision is the protect path's (ProtectedTpm::policy_view); this
// words it.
Status run_show(const ShowOptions& o) {
  TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o.protection.request());
  TPMSEC_RETURN_IF_ERROR(apply_policy_option(o.policy, o.protection.items_origin(), request));
  std::optional<MeasuredFacts> measured;
  if (!o.measurements.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(nlohmann::json j, read_json_file(o.measurements));
    TPMSEC_ASSIGN_OR_RETURN(StrategyCosts costs, costs_from_bench_json(j, o.measurements));
    measured = MeasuredFacts{measured_properties(costs), costs.source};
  }
  TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_protected(o.tpm, std::move(request)));
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<PolicyView> view, open.protect->policy_view(measured ? &*measured : nullptr));
  const PolicyDecision& d = view->decision;
  TPMSEC_RETURN_IF_ERROR(print_decision(*view));
  std::optional<StrategyCosts> boot_model = print_figures(open, d);
  print_detection(d, boot_model, o);
  fmt::print("{:<12}{}\n", "source", d.rule->source.empty() ? "(none given)" : d.rule->source);
  fmt::print("{:<12}{}\n", "rests on", fmt::join(d.rests_on, "; "));
  fmt::print("{:<12}{}\n", "linux", linux_equivalent(d.extend));
  fmt::print(stderr, "{}",
             weak_strategy_notice(d.extend, fmt::format("policy {} rule '{}'", view->policy.origin, d.rule->name)));
  return ok_status();
}

void register_show(CLI::App* policy, Action* action) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* sub = policy->add_subcommand("show", "The TPM's identity, the rule that matches it, the decision and why");
  o->tpm.add_to(sub);
  o->tpm.applies.policy = true;
  o->protection.add_to(sub, o->tpm);
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
  sub->callback([o, action] { *action = [o]() -> Status { return run_show(*o); }; });
}

void register_check(CLI::App* policy, Action* action) {
  auto file = std::make_shared<std::string>();
  CLI::App* sub =
      policy->add_subcommand("check", "Validate a policy file: syntax, keys, strategies, unreachable rules");
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
