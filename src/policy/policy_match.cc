// Matching a policy's rules against a TPM: identity first, then measured
// properties; the first rule that matches decides.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "tpmsec/policy.h"

namespace tpmsec {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string_view op_text(Condition::Op op) {
  switch (op) {
    case Condition::Op::kLess: return "<";
    case Condition::Op::kLessEqual: return "<=";
    case Condition::Op::kGreater: return ">";
    case Condition::Op::kGreaterEqual: return ">=";
  }
  return "?";
}

// Why `rule` does not match `facts`, or empty when it does.
std::string mismatch(const PolicyRule& rule, const TpmFacts& facts) {
  if (rule.manufacturer && lower(*rule.manufacturer) != lower(facts.manufacturer)) {
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
      return fmt::format("needs the measured {} (give --measurements RESULT.json, --emulate PROFILE, or run "
                         "`tpmsec policy calibrate`)",
                         c.property);
    }
    if (!c.holds(it->second)) return fmt::format("{} is {:.2f}, so not {}", c.property, it->second, c.text());
  }
  return {};
}

}  // namespace

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
      "extend_plain_ms", "extend_hmac_ms", "extend_added_ms", "per_command_ms",
      "saved_context_ms", "checkpoint_ms", "start_session_ms",
  };
  return kProperties;
}

bool Condition::holds(double measured) const {
  switch (op) {
    case Op::kLess: return measured < value;
    case Op::kLessEqual: return measured <= value;
    case Op::kGreater: return measured > value;
    case Op::kGreaterEqual: return measured >= value;
  }
  return false;
}

std::string Condition::text() const { return fmt::format("{} {} {}", property, op_text(op), value); }

bool PolicyRule::matches_everything() const {
  return !manufacturer && (!vendor || *vendor == "*") && !firmware_min && !firmware_max && when.empty();
}

TpmFacts facts_from_info(const TpmInfo& info) {
  TpmFacts f;
  f.manufacturer = info.manufacturer;
  f.vendor = info.vendor();
  // Both firmware properties zero: the TPM (or profile) does not say.
  if (info.firmware_version_1 != 0 || info.firmware_version_2 != 0) f.firmware = info.firmware_version();
  return f;
}

PolicyDecision decide(const Policy& policy, const TpmFacts& facts) {
  PolicyDecision d;
  for (const PolicyRule& rule : policy.rules) {
    RuleVerdict v;
    v.rule = &rule;
    v.why = mismatch(rule, facts);
    v.matched = v.why.empty();
    d.verdicts.push_back(v);
    if (v.matched) {
      d.rule = &rule;
      d.extend = rule.extend;
      d.other = rule.other;
      break;
    }
  }
  return d;
}

}  // namespace tpmsec
