// Per-TPM policy: which session strategy protects PCR extends (and, apart,
// other protected commands) on which TPM. The seed thread's open question,
// "a blacklist that turns off the extend hmac (or a whitelist that turns it
// on)", answered with ordered rules: the first rule that matches the TPM
// decides, and the last rule matches every TPM. Format: docs/policy.md.
//
//   [[rule]]
//   name = "infineon-slb9670"
//   manufacturer = "IFX"            # TPM_PT_MANUFACTURER, exact (case-insensitive)
//   vendor = "SLB9670*"             # vendor strings joined, a glob
//   firmware_min = "7.0"            # TPM_PT_FIRMWARE_VERSION_1 as "major.minor", inclusive
//   firmware_max = "7.255"
//   when = ["extend_hmac_ms > 20"]  # measured properties, all must hold
//   extend = "checkpoint"
//   other = "per-command"
//   reason = "..."
//   source = "..."
#ifndef TPMSEC_POLICY_H_
#define TPMSEC_POLICY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/text.h"
#include "tpmsec/result.h"
#include "tpmsec/strategy.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {

// A firmware version as vendors print TPM_PT_FIRMWARE_VERSION_1: "7.85" is
// major 7, minor 85 (the high and low 16 bits).
struct FirmwareVersion {
  uint32_t major = 0;
  uint32_t minor = 0;
  auto operator<=>(const FirmwareVersion&) const = default;
};
// "7.85" or "7"; nullopt when not of that form or out of 16-bit range.
std::optional<FirmwareVersion> parse_firmware_version(std::string_view text);
std::string to_string(const FirmwareVersion& v);

// The measured properties a rule may test (ms per PCR extend unless noted):
//   extend_plain_ms    PCR_Extend with password authorization
//   extend_hmac_ms     PCR_Extend in a resident HMAC session (steady state)
//   extend_added_ms    extend_hmac_ms - extend_plain_ms
//   per_command_ms     a protected extend the Linux 6.10 way (4 TPM commands)
//   saved_context_ms   a protected extend with a context-saved session
//   checkpoint_ms      plain extends with an audited read every 100 (amortized)
//   start_session_ms   a salted StartAuthSession (ECC), one command
const std::vector<std::string>& policy_properties();

// A condition on a measured property: "extend_hmac_ms > 20".
struct Condition {
  enum class Op { kLess, kLessEqual, kGreater, kGreaterEqual };
  std::string property;
  Op op = Op::kGreater;
  double value = 0;
  bool holds(double measured) const;
  std::string text() const;
  bool operator==(const Condition&) const = default;
};

struct PolicyRule {
  std::string name;
  size_t line = 0;  // where the rule starts in its file
  std::optional<std::string> manufacturer;
  std::optional<std::string> vendor;  // glob: * ? [..]
  std::optional<FirmwareVersion> firmware_min;
  std::optional<FirmwareVersion> firmware_max;
  std::vector<Condition> when;
  StrategyKind extend = StrategyKind::kResident;
  StrategyKind other = StrategyKind::kPerCommand;
  std::string reason;
  std::string source;

  // No identity keys and no conditions: matches every TPM.
  bool matches_everything() const;
};

struct Policy {
  std::string origin;  // the file (or "<text>")
  std::vector<PolicyRule> rules;
};

// Parses and validates a policy. Errors name the origin, the line and the
// problem: TOML syntax, an unknown key, a wrong type, an unknown strategy or
// property, `other` set to an extend-only strategy, a rule that can never
// match (an earlier rule covers it, an empty firmware range, contradictory
// conditions), no last rule matching every TPM.
Result<Policy> parse_policy(std::string_view text, const std::string& origin);
Result<Policy> load_policy(const std::string& path);

// $TPMSEC_POLICY if set, else TPMSEC_DATA_DIR/policy/default.toml.
std::string default_policy_path();

// What a policy is matched against: the TPM's identity and, when known,
// measured properties (from an emulation profile, a bench result or a
// calibration run).
struct TpmFacts {
  std::string manufacturer;  // "IFX"
  std::string vendor;        // "SLB9670"
  std::string firmware;      // "7.85"
  bool emulated = false;
  std::string profile;  // when emulated
  std::map<std::string, double> measured;
  std::string measured_source;  // "profile slb9670", "bench result r.json"
};
TpmFacts facts_from_info(const TpmInfo& info);

// Why a rule did or did not match.
struct RuleVerdict {
  const PolicyRule* rule = nullptr;
  bool matched = false;
  std::string why;  // "vendor 'SLB9672' does not match 'SLB9670*'"
};

struct PolicyDecision {
  const PolicyRule* rule = nullptr;  // the first rule that matched
  StrategyKind extend = StrategyKind::kResident;
  StrategyKind other = StrategyKind::kPerCommand;
  std::vector<RuleVerdict> verdicts;  // every rule up to and including the match
};

// The first matching rule. A rule testing a property the facts do not have
// does not match (its verdict says which measurement is missing).
PolicyDecision decide(const Policy& policy, const TpmFacts& facts);

// Whether every TPM `later` matches is also matched by `earlier` (so a
// `later` placed after `earlier` can never match).
bool covers(const PolicyRule& earlier, const PolicyRule& later);

// The rule as a [[rule]] table in the policy format (parse_policy reads it back).
std::string to_toml(const PolicyRule& rule);

}  // namespace tpmsec

#endif  // TPMSEC_POLICY_H_
