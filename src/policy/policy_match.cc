// Matching a policy's rules against a TPM: identity first, then measured
// properties; the first rule that matches decides, and the floor keeps
// prevention unless every fact the decision rests on is authentic.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "tpmsec/policy/policy.h"
#include "tpmsec/text.h"
#include "tpmsec/transport.h"

namespace tpmsec {
namespace {

std::string_view op_text(Condition::Op op) {
  switch (op) {
    case Condition::Op::kLess:
      return "<";
    case Condition::Op::kLessEqual:
      return "<=";
    case Condition::Op::kGreater:
      return ">";
    case Condition::Op::kGreaterEqual:
      return ">=";
  }
  return "?";
}

// Why `rule` does not match `facts`, or empty when it does.
std::string mismatch(const PolicyRule& rule, const TpmFacts& facts) {
  if (rule.manufacturer && ascii_lower(*rule.manufacturer) != ascii_lower(facts.manufacturer)) {
    return fmt::format("manufacturer '{}' is not '{}'", facts.manufacturer, *rule.manufacturer);
  }
  if (rule.vendor && !glob_match(*rule.vendor, facts.vendor)) {
    return fmt::format("vendor '{}' does not match '{}'", facts.vendor, *rule.vendor);
  }
  if (rule.firmware_min || rule.firmware_max) {
    auto fw = parse_firmware_version(facts.firmware);
    if (!fw) return fmt::format("firmware '{}' is not a version the rule's range can test", facts.firmware);
    if (rule.firmware_min && *fw < *rule.firmware_min) {
      return fmt::format("firmware {} is below {}", facts.firmware, to_string(*rule.firmware_min));
    }
    if (rule.firmware_max && *fw > *rule.firmware_max) {
      return fmt::format("firmware {} is above {}", facts.firmware, to_string(*rule.firmware_max));
    }
  }
  for (const Condition& c : rule.when) {
    auto it = facts.measured.find(c.property);
    if (it == facts.measured.end()) {
      return fmt::format(
          "needs the measured {} (give --measurements RESULT.json, --emulate PROFILE, or run "
          "`tpmsec policy calibrate`)",
          c.property);
    }
    if (!c.holds(it->second)) return fmt::format("{} is {:.2f}, so not {}", c.property, it->second, c.text());
  }
  return {};
}

// The prevention strategy kept when the floor overrules `rule`.
StrategyKind fallback_for(const PolicyRule& rule, const TpmFacts& facts, std::string* why) {
  if (rule.fallback) {
    *why = "the rule's fallback";
    return *rule.fallback;
  }
  static const std::pair<const char*, StrategyKind> kFigures[] = {
      {"extend_hmac_ms", StrategyKind::kResident},
      {"saved_context_ms", StrategyKind::kSavedContext},
      {"per_command_ms", StrategyKind::kPerCommand},
  };
  const std::pair<const char*, StrategyKind>* best = nullptr;
  double best_ms = 0;
  for (const auto& f : kFigures) {
    auto it = facts.measured.find(f.first);
    if (it == facts.measured.end()) continue;
    if (!best || it->second < best_ms) {
      best = &f;
      best_ms = it->second;
    }
  }
  if (!best) {
    *why = "the default prevention strategy; no figures for this TPM";
    return StrategyKind::kResident;
  }
  *why = fmt::format("the cheapest prevention strategy by the figures of {}: {} {:.2f} ms per extend",
                     facts.measured_source.empty() ? "this TPM" : facts.measured_source, strategy_name(best->second),
                     best_ms);
  return best->second;
}

}  // namespace

std::string_view strategy_gives_up(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kPlain:
      return "extends are not protected against a bus interposer";
    case StrategyKind::kCheckpoint:
      return "detects, does not prevent, a dropped or substituted extend; on resettable PCRs 16/23 a reset followed "
             "by a replay is not detected";
    default:
      return {};
  }
}

std::string weak_strategy_notice(StrategyKind kind, std::string_view chosen_by) {
  if (prevents(kind)) return {};
  return fmt::format("tpmsec: strategy {} ({}): {}\n", strategy_name(kind), chosen_by, strategy_gives_up(kind));
}

bool authentic(FactOrigin origin) { return origin != FactOrigin::kUnauthenticated; }

std::string_view fact_origin_text(FactOrigin origin) {
  switch (origin) {
    case FactOrigin::kUnauthenticated:
      return "read without authentication";
    case FactOrigin::kAudited:
      return "audited";
    case FactOrigin::kProfile:
      return "from the profile";
    case FactOrigin::kNoBus:
      return "embedded TPM, no bus";
  }
  return "?";
}

std::optional<FirmwareVersion> parse_firmware_version(std::string_view text) {
  FirmwareVersion v;
  size_t dot = text.find('.');
  std::string_view major = text.substr(0, dot);
  std::string_view minor = dot == std::string_view::npos ? std::string_view("0") : text.substr(dot + 1);
  auto parse = [](std::string_view s, uint32_t* out) {
    if (s.empty() || s.size() > 5) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && end == s.data() + s.size() && *out <= 0xFFFF;
  };
  if (!parse(major, &v.major) || !parse(minor, &v.minor)) return std::nullopt;
  return v;
}

std::string to_string(const FirmwareVersion& v) { return fmt::format("{}.{}", v.major, v.minor); }

const std::vector<std::string>& policy_properties() {
  static const std::vector<std::string> kProperties = {
      "extend_plain_ms",  "extend_hmac_ms", "extend_added_ms",  "per_command_ms",
      "saved_context_ms", "checkpoint_ms",  "start_session_ms",
  };
  return kProperties;
}

bool Condition::holds(double measured) const {
  switch (op) {
    case Op::kLess:
      return measured < value;
    case Op::kLessEqual:
      return measured <= value;
    case Op::kGreater:
      return measured > value;
    case Op::kGreaterEqual:
      return measured >= value;
  }
  return false;
}

std::string Condition::text() const { return fmt::format("{} {} {}", property, op_text(op), value); }

bool PolicyRule::matches_everything() const { return !tests_identity() && when.empty(); }

bool PolicyRule::tests_identity() const {
  return manufacturer || (vendor && *vendor != "*") || firmware_min || firmware_max;
}

bool PolicyRule::lowers_protection() const { return !prevents(extend) || !prevents(other); }

TpmFacts facts_from_info(const TpmInfo& info) {
  TpmFacts f;
  f.manufacturer = info.manufacturer;
  f.vendor = info.vendor();
  // Both firmware properties zero: the TPM (or profile) does not say.
  if (info.firmware_version_1 != 0 || info.firmware_version_2 != 0) f.firmware = info.firmware_version();
  return f;
}

TpmFacts facts_of(const TpmInfo& info, const Transport& transport) {
  TpmFacts f = facts_from_info(info);
  // read_tpm_info's plain GetCapability: authentic only where no bus carries it.
  f.identity_origin = transport.in_process() ? FactOrigin::kNoBus : FactOrigin::kUnauthenticated;
  return f;
}

PolicyDecision decide(const Policy& policy, const TpmFacts& facts) {
  PolicyDecision d;
  // What the rules tried test: a rule that did not match decided too, by not matching.
  bool identity_tested = false;
  std::set<std::string> timings;
  for (const PolicyRule& rule : policy.rules) {
    RuleVerdict v;
    v.rule = &rule;
    v.why = mismatch(rule, facts);
    v.matched = v.why.empty();
    d.verdicts.push_back(v);
    identity_tested |= rule.tests_identity();
    for (const Condition& c : rule.when) timings.insert(c.property);
    if (v.matched) {
      d.rule = &rule;
      d.extend = rule.extend;
      d.other = rule.other;
      if (rule.null_key) d.tuning.null_key = *rule.null_key;
      if (rule.checkpoint_every) d.tuning.checkpoint_every = *rule.checkpoint_every;
      break;
    }
  }
  std::string timing_list = fmt::format("{}", fmt::join(timings, ", "));
  d.rests_on.push_back(fmt::format("policy {} ({})", policy.origin,
                                   policy.operator_chosen ? "chosen by the operator" : "shipped default"));
  if (identity_tested) {
    d.rests_on.push_back(
        fmt::format("identity: manufacturer, vendor, firmware ({})", fact_origin_text(facts.identity_origin)));
  }
  if (!timings.empty()) {
    d.rests_on.push_back(fmt::format("timings: {} ({}{})", timing_list, fact_origin_text(facts.measured_origin),
                                     facts.measured_source.empty() ? "" : ", " + facts.measured_source));
  }
  if (!d.rule || !d.rule->lowers_protection()) return d;

  // The floor: below prevention only on facts no interposer chose.
  const PolicyRule& rule = *d.rule;
  if (!policy.operator_chosen) {
    d.floor_reason =
        "the shipped policy never lowers protection (plain or checkpoint needs --strategy, or a policy file you "
        "choose with --policy FILE or $TPMSEC_POLICY)";
  } else if (!timings.empty() && !authentic(facts.measured_origin) && !rule.trust_timings) {
    d.floor_reason = fmt::format(
        "the decision rests on timings ({}) measured over a bus, which an interposer delaying responses can inflate, "
        "and rule '{}' does not say trust_timings = true",
        timing_list, rule.name);
  } else if (identity_tested && !authentic(facts.identity_origin)) {
    d.floor_reason =
        "the decision rests on the TPM's identity, read without authentication (an interposer can "
        "rewrite it)";
    if (facts.identity_note.empty()) {
      d.needs_audited_identity = true;
    } else {
      d.floor_reason += "; " + facts.identity_note;
    }
  }
  if (d.floor_reason.empty()) return d;
  StrategyKind keep = fallback_for(rule, facts, &d.fallback_reason);
  if (!prevents(rule.extend)) {
    d.lifted_extend = rule.extend;
    d.extend = keep;
  }
  if (!prevents(rule.other)) {
    d.lifted_other = rule.other;
    d.other = keep;
  }
  return d;
}

}  // namespace tpmsec
