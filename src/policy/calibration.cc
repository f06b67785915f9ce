#include "tpmsec/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tpmsec {
namespace {

// A strategy's steady-state cost per extend: the median, except checkpoint,
// whose cost is amortized over its period, so the mean.
double steady_cost(StrategyKind k, const Distribution& d) { return k == StrategyKind::kCheckpoint ? d.mean : d.median; }

constexpr std::string_view kSaltedStart = "StartAuthSession (ECC salt)";

}  // namespace

StrategyCosts costs_from_profile(const LatencyProfile& profile, uint32_t checkpoint_every) {
  ExtendFigures f = extend_figures(profile);
  StrategyCosts c;
  c.per_extend_ms[StrategyKind::kPerCommand] = f.per_command_ms;
  c.per_extend_ms[StrategyKind::kSavedContext] = f.saved_context_ms;
  c.per_extend_ms[StrategyKind::kResident] = f.hmac_ms;
  c.per_extend_ms[StrategyKind::kPlain] = f.plain_ms;
  c.per_extend_ms[StrategyKind::kCheckpoint] =
      f.plain_ms + (checkpoint_every ? f.audited_read_ms / checkpoint_every : 0.0);
  c.start_session_ms = f.start_session_ms;
  c.source = fmt::format("profile {} (model means: `tpmsec profiles show {}`)", profile.id, profile.id);
  return c;
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

TpmFacts facts_of(const TpmInfo& info, const Transport& transport) {
  TpmFacts f = facts_from_info(info);
  // read_tpm_info's plain GetCapability: authentic only where no bus carries it.
  f.identity_origin = transport.in_process() ? FactOrigin::kNoBus : FactOrigin::kUnauthenticated;
  return f;
}

TpmFacts facts_of(const MeasuredTpm& tpm) {
  TpmFacts f;
  if (tpm.emulated) {
    f = facts_from_info(tpm.emulated->info);
    f.emulated = true;
    f.profile = tpm.emulated->profile;
    f.identity_origin = FactOrigin::kProfile;
  } else if (tpm.base) {
    f = facts_of(tpm.info, *tpm.base);
  } else {
    f = facts_from_info(tpm.info);
  }
  if (tpm.latency_profile) {
    StrategyCosts costs = costs_from_profile(*tpm.latency_profile);
    f.measured = measured_properties(costs);
    f.measured_source = costs.source;
    f.measured_origin = FactOrigin::kProfile;
  }
  return f;
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
