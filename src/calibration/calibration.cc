#include "tpmsec/calibration/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "tpmsec/emulation/profile_summary.h"
#include "tpmsec/emulation/value_range.h"

namespace tpmsec {
namespace {

// A strategy's steady-state cost per extend: the median, except checkpoint,
// whose cost is amortized over its period, so the mean.
double steady_cost(StrategyKind k, const Distribution& d) { return k == StrategyKind::kCheckpoint ? d.mean : d.median; }

constexpr std::string_view kSaltedStart = "StartAuthSession (ECC salt)";

}  // namespace

namespace {

// Each strategy's cost per extend from a profile's values: the one formula
// for the central figure and both ends of its range.
std::map<StrategyKind, double> costs_per_extend(const LatencyProfile& profile, uint32_t checkpoint_every) {
  ExtendFigures f = extend_figures(profile);
  return {{StrategyKind::kPerCommand, f.per_command_ms},
          {StrategyKind::kSavedContext, f.saved_context_ms},
          {StrategyKind::kResident, f.hmac_ms},
          {StrategyKind::kPlain, f.plain_ms},
          {StrategyKind::kCheckpoint, f.plain_ms + (checkpoint_every ? f.audited_read_ms / checkpoint_every : 0.0)}};
}

}  // namespace

StrategyCosts costs_from_profile(const LatencyProfile& profile, uint32_t checkpoint_every) {
  StrategyCosts c;
  c.per_extend_ms = costs_per_extend(profile, checkpoint_every);
  c.start_session_ms = extend_figures(profile).start_session_ms;
  c.source = fmt::format("profile {} (model means: `tpmsec profiles show {}`)", profile.id, profile.id);
  // The range: the same sums with every value at its low, then high end.
  auto low = costs_per_extend(profile_at(profile, RangeEnd::kLow), checkpoint_every);
  auto high = costs_per_extend(profile_at(profile, RangeEnd::kHigh), checkpoint_every);
  auto estimated = costs_per_extend(estimated_part(profile), checkpoint_every);
  for (const auto& [kind, ms] : c.per_extend_ms) c.range_ms[kind] = {low[kind], high[kind], estimated[kind]};
  return c;
}

namespace {

double null_key_create_ms(const ExtendFigures& f, SaltKind salt) {
  return salt == SaltKind::kRsa ? f.create_null_key_rsa_ms : f.create_null_key_ms;
}

}  // namespace

SessionTuning tuning_from_profile(const LatencyProfile& profile, SaltKind salt) {
  const ExtendFigures f = extend_figures(profile);
  SessionTuning t;
  t.null_key = null_key_create_ms(f, salt) < f.reload_null_key_ms ? NullKeyLoad::kRecreate : NullKeyLoad::kReload;
  const double allowed = kCheckpointReadShare * f.plain_ms;
  if (allowed > 0 && f.audited_read_ms > 0) {
    t.checkpoint_every = static_cast<uint32_t>(std::min(1e6, std::ceil(f.audited_read_ms / allowed)));
  }
  return t;
}

std::string tuning_reason(const LatencyProfile& profile, SaltKind salt) {
  const ExtendFigures f = extend_figures(profile);
  const SessionTuning t = tuning_from_profile(profile, salt);
  const double create = null_key_create_ms(f, salt);
  return fmt::format(
      "null key: {} (CreatePrimary {:.2f} ms {} ContextLoad {:.2f} ms); checkpoint every {} (an audited read of "
      "{:.2f} ms over {} extends is at most {:.0f}% of plain {:.2f} ms)",
      null_key_load_name(t.null_key), create, create < f.reload_null_key_ms ? "<" : ">=", f.reload_null_key_ms,
      t.checkpoint_every, f.audited_read_ms, t.checkpoint_every, kCheckpointReadShare * 100, f.plain_ms);
}

StrategyCosts costs_from_bench(const BenchResult& result, const std::string& source) {
  StrategyCosts c = strategy_costs(result);
  for (const PrimitiveResult& p : result.primitives) {
    if (p.name == kSaltedStart && p.tpm_ms.n > 0) c.start_session_ms = p.tpm_ms.median;
  }
  c.source = source;
  return c;
}

Result<StrategyCosts> costs_from_bench_json(const nlohmann::json& bench, const std::string& origin) {
  auto schema = bench.is_object() ? bench.find("schema") : bench.end();
  if (schema == bench.end() || *schema != "tpmsec-bench/1") {
    return usage_error(fmt::format("{}: not a tpmsec bench result (schema tpmsec-bench/1)", origin));
  }
  StrategyCosts c;
  auto strategies = bench.find("strategies");
  if (strategies == bench.end() || !strategies->is_array()) {
    return usage_error(fmt::format("{}: 'strategies' is not a list", origin));
  }
  for (const auto& s : *strategies) {
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string()) {
      return usage_error(fmt::format("{}: a strategy entry has no name", origin));
    }
    auto kind = parse_strategy(s["name"].get<std::string>());
    if (!kind.ok()) return usage_error(fmt::format("{}: {}", origin, kind.error().message()));
    auto d = s.find("per_extend_ms");
    Distribution per_extend = d == s.end() ? Distribution{} : distribution_from_json(*d);
    if (per_extend.n > 0) c.per_extend_ms[*kind] = steady_cost(*kind, per_extend);
  }
  auto primitives = bench.find("primitives");
  if (primitives != bench.end() && primitives->is_array()) {
    for (const auto& p : *primitives) {
      auto name = p.is_object() ? p.find("name") : p.end();
      if (name == p.end() || !name->is_string() || *name != kSaltedStart || !p.contains("tpm_ms")) continue;
      Distribution d = distribution_from_json(p["tpm_ms"]);
      if (d.n > 0) c.start_session_ms = d.median;
    }
  }
  if (c.per_extend_ms.empty()) return usage_error(fmt::format("{}: no strategy was measured", origin));
  c.source = fmt::format("bench result {}", origin);
  return c;
}

const CostRange* cost_range(const StrategyCosts& costs, StrategyKind kind) {
  auto it = costs.range_ms.find(kind);
  return it == costs.range_ms.end() ? nullptr : &it->second;
}

double estimated_share(const StrategyCosts& costs, StrategyKind kind) {
  const CostRange* r = cost_range(costs, kind);
  auto ms = costs.per_extend_ms.find(kind);
  if (!r || ms == costs.per_extend_ms.end() || ms->second <= 0) return 0.0;
  return std::clamp(r->estimated_ms / ms->second, 0.0, 1.0);
}

namespace {

double ms_of(const StrategyCosts& costs, StrategyKind kind) {
  auto it = costs.per_extend_ms.find(kind);
  return it == costs.per_extend_ms.end() ? 0.0 : it->second;
}

std::string percent(double share) { return fmt::format("{:.0f}%", 100 * share); }

std::string range_text(const CostRange& r) { return fmt::format("{:.2f}-{:.2f}", r.low_ms, r.high_ms); }

// Prevention, detection, none (as choose_strategy ranks them).
int protection_rank(StrategyKind k) {
  if (prevents(k)) return 0;
  return k == StrategyKind::kCheckpoint ? 1 : 2;
}
int floor_rank(ProtectionFloor f) {
  return f == ProtectionFloor::kPrevention ? 0 : f == ProtectionFloor::kDetection ? 1 : 2;
}

}  // namespace

std::string cost_text(const StrategyCosts& costs, StrategyKind kind) {
  const double ms = ms_of(costs, kind);
  const CostRange* r = cost_range(costs, kind);
  if (!r) return fmt::format("{:.2f} ms", ms);
  const double e = estimated_share(costs, kind);
  return fmt::format("{:.2f} ms ({}{})", ms, range_text(*r), e > 0 ? ", " + percent(e) + " E" : "");
}

std::vector<std::string> uncertainty_notes(StrategyKind chosen, const StrategyCosts& costs, double budget_ms,
                                           ProtectionFloor floor) {
  std::vector<std::string> notes;
  const CostRange* mine = cost_range(costs, chosen);
  if (!mine) return notes;
  // The runner-up: the cheapest other allowed strategy of the same
  // protection, else the cheapest other allowed one.
  std::optional<StrategyKind> runner_up;
  for (int pass = 0; pass < 2 && !runner_up; ++pass) {
    for (const auto& [kind, ms] : costs.per_extend_ms) {
      if (kind == chosen || !cost_range(costs, kind) || protection_rank(kind) > floor_rank(floor)) continue;
      if (pass == 0 && protection_rank(kind) != protection_rank(chosen)) continue;
      if (!runner_up || ms < ms_of(costs, *runner_up)) runner_up = kind;
    }
  }
  const double e_mine = estimated_share(costs, chosen);
  const double e_other = runner_up ? estimated_share(costs, *runner_up) : 0.0;
  const CostRange* other = runner_up ? cost_range(costs, *runner_up) : nullptr;
  const bool overlap = other && mine->low_ms <= other->high_ms && other->low_ms <= mine->high_ms;
  if (e_mine > 0 || e_other > 0) {
    std::vector<std::string> parts;
    if (e_mine > 0) {
      parts.push_back(
          fmt::format("{} of {}'s {:.2f} ms", percent(e_mine), strategy_name(chosen), ms_of(costs, chosen)));
    }
    if (e_other > 0) {
      parts.push_back(fmt::format("{} of {}'s {:.2f} ms (the runner-up)", percent(e_other), strategy_name(*runner_up),
                                  ms_of(costs, *runner_up)));
    }
    // Only the runner-up's cost estimated, and its range clear of the chosen
    // one's: the estimates' stated error cannot change the decision.
    const bool clear = e_mine == 0 && !overlap;
    std::string note =
        fmt::format("{} rests on estimated values (E): {} come{} from E values", clear ? "the runner-up" : "decision",
                    fmt::join(parts, " and "), parts.size() == 1 ? "s" : "");
    if (clear) {
      note += fmt::format(
          "; its range {} ms stays clear of {}'s {} ms, so their stated error does not change the "
          "decision",
          range_text(*other), strategy_name(chosen), range_text(*mine));
    }
    notes.push_back(note + " (docs/latency-profiles.md, \"Uncertainty\")");
  }
  if (overlap) {
    notes.push_back(
        fmt::format("within the uncertainty of {}: {} {} ms and {} {} ms overlap; the central figures "
                    "decide",
                    strategy_name(*runner_up), strategy_name(chosen), range_text(*mine), strategy_name(*runner_up),
                    range_text(*other)));
  }
  if (budget_ms > 0) {
    std::vector<std::string> parts;
    if (mine->low_ms <= budget_ms && budget_ms < mine->high_ms) {
      parts.push_back(fmt::format("{} {} ms", strategy_name(chosen), range_text(*mine)));
    }
    for (const auto& [kind, ms] : costs.per_extend_ms) {
      const CostRange* r = cost_range(costs, kind);
      if (!r || kind == chosen || protection_rank(kind) >= protection_rank(chosen)) continue;
      if (ms > budget_ms && r->low_ms <= budget_ms) {
        parts.push_back(
            fmt::format("{} {} ms (more protective, over budget at {:.2f})", strategy_name(kind), range_text(*r), ms));
      }
    }
    if (!parts.empty()) {
      notes.push_back(fmt::format("within the uncertainty of the {:.1f} ms budget (it may fit or not): {}", budget_ms,
                                  fmt::join(parts, "; ")));
    }
  }
  return notes;
}

std::map<std::string, double> measured_properties(const StrategyCosts& costs) {
  std::map<std::string, double> m;
  auto put = [&](const char* name, StrategyKind k) {
    auto it = costs.per_extend_ms.find(k);
    if (it != costs.per_extend_ms.end()) m[name] = it->second;
  };
  put("extend_plain_ms", StrategyKind::kPlain);
  put("extend_hmac_ms", StrategyKind::kResident);
  put("per_command_ms", StrategyKind::kPerCommand);
  put("saved_context_ms", StrategyKind::kSavedContext);
  put("checkpoint_ms", StrategyKind::kCheckpoint);
  if (m.count("extend_plain_ms") && m.count("extend_hmac_ms")) {
    m["extend_added_ms"] = m["extend_hmac_ms"] - m["extend_plain_ms"];
  }
  if (costs.start_session_ms > 0) m["start_session_ms"] = costs.start_session_ms;
  return m;
}

TpmFacts facts_of(const LatencyProfile& profile) {
  // The emulated identity takes nothing of the real TPM's that the facts
  // read (manufacturer, vendor, firmware): no TPM is needed.
  TpmFacts f = facts_from_info(emulated_info(profile, TpmInfo{}).info);
  f.emulated = true;
  f.profile = profile.id;
  f.identity_origin = FactOrigin::kProfile;
  StrategyCosts costs = costs_from_profile(profile);
  f.measured = measured_properties(costs);
  f.measured_source = costs.source;
  f.measured_origin = FactOrigin::kProfile;
  return f;
}

TpmFacts facts_of(const MeasuredTpm& tpm) {
  if (tpm.latency_profile) return facts_of(*tpm.latency_profile);
  return facts_of(tpm.info, *tpm.base);
}

PolicyRule rule_for(const std::string& name, const TpmFacts& facts, const Calibration& c, const std::string& source) {
  PolicyRule r;
  r.name = name;
  if (!facts.manufacturer.empty()) r.manufacturer = facts.manufacturer;
  if (!facts.vendor.empty()) r.vendor = facts.vendor + "*";
  if (auto fw = parse_firmware_version(facts.firmware); fw && !facts.firmware.empty()) {
    r.firmware_min = FirmwareVersion{fw->major, 0};
    r.firmware_max = FirmwareVersion{fw->major, 0xFFFF};
  }
  r.extend = c.extend;
  r.other = c.other;
  r.reason = c.reason;
  r.source = source;
  return r;
}

std::string linux_equivalent(StrategyKind extend) {
  switch (extend) {
    case StrategyKind::kPerCommand:
    case StrategyKind::kSavedContext:
    case StrategyKind::kResident:
      return "keep CONFIG_TCG_TPM2_HMAC=y (Linux 6.12 and later keep the session resident; 6.18 needs it enabled "
             "explicitly)";
    case StrategyKind::kCheckpoint:
      return "boot with tpm.disable_pcr_integrity=1 (Linux has no checkpoint strategy: verify PCRs with a remote "
             "quote or tpmsec's checkpoint instead)";
    case StrategyKind::kPlain:
      return "boot with tpm.disable_pcr_integrity=1";
  }
  return {};
}

}  // namespace tpmsec
