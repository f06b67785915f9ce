// Per-TPM policy: which session strategy protects PCR extends (and, apart, other protected commands) on
// which TPM. The seed thread's open question, "a blacklist that turns off the extend hmac (or a whitelist
// that turns it on)", answered with ordered [[rule]] tables (TOML: manufacturer, vendor glob, firmware
// range, measured `when` conditions; extend, other, fallback, trust_timings, null_key, checkpoint_every,
// reason, source): the first rule that matches the TPM decides, and the last rule matches every TPM.
// The floor: no fact an interposer can choose lowers protection. A decision below prevention (plain,
// checkpoint) stands only when the policy is one the operator chose (--policy FILE, $TPMSEC_POLICY),
// every identity fact the rules up to the deciding one tested is authentic (audited, a profile's, or the
// embedded TPM's), and every timing they tested is a profile's or the deciding rule says trust_timings.
// Otherwise decide() keeps prevention: the rule's fallback, else the cheapest prevention strategy by the
// measured figures, else resident.
// Errors: parse_policy()/load_policy() return an error (kUsage) naming the origin, the line and the
// problem; decide() cannot fail (the last rule matches). Policies and facts are values: thread-safe.
// The format with an example rule: docs/policy.md, "The format"; why the floor holds:
// docs/policy.md#what-a-decision-rests-on.
#ifndef TPMSEC_POLICY_POLICY_H_
#define TPMSEC_POLICY_POLICY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/result.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/strategy.h"
#include "tpmsec/text.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {

class Transport;

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

// What a strategy below prevention gives up, one clause (empty for prevention):
//   plain       "extends are not protected against a bus interposer"
//   checkpoint  "detects, does not prevent, a dropped or substituted extend; ..."
std::string_view strategy_gives_up(StrategyKind kind);
// The stderr line every command prints when it uses (or recommends) plain or
// checkpoint, `chosen_by` saying who chose it ("operator's --strategy");
// empty for a prevention strategy:
//   "tpmsec: strategy plain (operator's --strategy): extends are not protected ..."
std::string weak_strategy_notice(StrategyKind kind, std::string_view chosen_by);

// How the chosen strategy's sessions are run on a TPM model. Cost only, never
// protection, so a rule matched on an identity read without authentication
// may set them (an interposer that steers them changes what a run costs, not
// what it protects). `policy derive` writes them from each profile's figures.
struct SessionTuning {
  // ContextLoad of the kept null key, or CreatePrimary held to the pin,
  // whichever the chip does faster (null_key.h).
  NullKeyLoad null_key = NullKeyLoad::kReload;
  // checkpoint: an audited PCR read every N extends (0: only at the end).
  // The default where no rule says: every 100.
  uint32_t checkpoint_every = 100;
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
  // Rules choosing plain or checkpoint only: the prevention strategy used
  // when the floor does not let the rule lower protection.
  std::optional<StrategyKind> fallback;
  // Rules choosing plain or checkpoint only: timings measured over a bus
  // (a bench result, a calibration) may lower protection, although an
  // interposer that delays responses can inflate them.
  bool trust_timings = false;
  // SessionTuning for this TPM; unset keys keep SessionTuning's defaults.
  std::optional<NullKeyLoad> null_key;
  std::optional<uint32_t> checkpoint_every;
  std::string reason;
  std::string source;

  // No identity keys and no conditions: matches every TPM.
  bool matches_everything() const;
  // Tests manufacturer, vendor (other than "*") or firmware.
  bool tests_identity() const;
  // Chooses plain or checkpoint for extends, or plain for other commands.
  bool lowers_protection() const;
};

struct Policy {
  std::string origin;  // the file (or "<text>")
  std::vector<PolicyRule> rules;
  // Chosen by the operator for this machine (--policy FILE or $TPMSEC_POLICY):
  // only such a policy may lower protection. The shipped default is not.
  bool operator_chosen = false;
};

// Parses and validates a policy. Errors name the origin, the line and the
// problem: TOML syntax, an unknown key, a wrong type, an unknown strategy or
// property, `other` set to an extend-only strategy, a rule that can never
// match (an earlier rule covers it, an empty firmware range, contradictory
// conditions), no last rule matching every TPM.
Result<Policy> parse_policy(std::string_view text, const std::string& origin);
Result<Policy> load_policy(const std::string& path);
// Where a command's policy file is (--policy, $TPMSEC_POLICY, the shipped
// default) is the host's: tpmsec/host/policy_path.h; the policy a command
// follows, load_command_policy(), is in tpmsec/protect.h.

// Where a fact came from, so whether an interposer on the bus could have chosen it.
enum class FactOrigin {
  kUnauthenticated,  // read or timed over a bus with nothing authenticating it
  kAudited,          // read in an audit session salted to a trusted key, response HMAC checked
  kProfile,          // a local latency profile (--emulate, policy derive): no bus involved
  kNoBus,            // the embedded TPM (Transport::in_process()): nothing between tpmsec and it
};
bool authentic(FactOrigin origin);
// "read without authentication", "audited", "from the profile", "embedded TPM, no bus".
std::string_view fact_origin_text(FactOrigin origin);

// What a policy is matched against: the TPM's identity and, when known,
// measured properties (from an emulation profile, a bench result or a
// calibration run), each with where it came from.
struct TpmFacts {
  std::string manufacturer;  // "IFX"
  std::string vendor;        // "SLB9670"
  std::string firmware;      // "7.85"
  bool emulated = false;
  std::string profile;  // when emulated
  std::map<std::string, double> measured;
  std::string measured_source;  // "profile slb9670", "bench result r.json"
  // Set by whoever reads the facts; decide() trusts nothing else.
  FactOrigin identity_origin = FactOrigin::kUnauthenticated;
  FactOrigin measured_origin = FactOrigin::kUnauthenticated;
  // Why the identity could not be authenticated, when that was tried ("--unsalted: ...").
  std::string identity_note;
};
// The identity in `info`, with identity_origin unauthenticated.
TpmFacts facts_from_info(const TpmInfo& info);
// The facts of a TPM opened without the measurement layer: `info` read from it
// over `transport`; the identity is kNoBus on an in_process() transport and
// kUnauthenticated on any other (a plain GetCapability; decide_on_tpm
// authenticates it when a decision needs it).
TpmFacts facts_of(const TpmInfo& info, const Transport& transport);

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
  // The matched rule's tuning (SessionTuning's defaults where it says nothing).
  SessionTuning tuning;
  std::vector<RuleVerdict> verdicts;  // every rule up to and including the match
  // The facts the decision rests on: "policy FILE (operator's)", "manufacturer,
  // vendor, firmware (read without authentication)", "extend_hmac_ms (...)".
  std::vector<std::string> rests_on;
  // Set when the rule chose below prevention and the floor kept prevention:
  std::optional<StrategyKind> lifted_extend;  // what the rule chose for extends
  std::optional<StrategyKind> lifted_other;   // ... for other commands
  std::string floor_reason;                   // why the rule may not lower protection here
  std::string fallback_reason;                // how the prevention strategy was chosen ("the rule's fallback")
  // The floor applied only because the identity was read without
  // authentication: reading it through an audited session may lift it.
  bool needs_audited_identity = false;
};

// The first matching rule, then the floor (top of this file). A rule testing
// a property the facts do not have does not match (its verdict says which
// measurement is missing).
PolicyDecision decide(const Policy& policy, const TpmFacts& facts);

// The identity properties (TPM_PT_MANUFACTURER .. TPM_PT_FIRMWARE_VERSION_2:
// manufacturer, vendor strings 1-4, vendor TPM type, firmware 1-2) in one
// GetCapability carrying an audit session from `factory`, whose response HMAC
// Tpm::execute checks before a byte is parsed. With a salted factory whose
// salt key is trusted, an interposer can neither forge nor replay the answer.
Result<TpmInfo> read_audited_identity(SessionFactory& factory);

// The identity in `facts` read again with read_audited_identity (a factory
// made from `protection`; `info` chooses its salt): equal, identity_origin
// becomes kAudited; different, an integrity error (an interposer rewrote the
// plain read). What decide_on_tpm does when a decision needs it, and what
// `policy show` does when a trust anchor is named.
Status confirm_identity(TpmFacts& facts, Tpm& tpm, const ProtectionConfig& protection, const TpmInfo* info);

// decide() for a TPM on a transport: when the decision would lower
// protection on an identity read without authentication, the identity is
// read again with read_audited_identity (a factory made from `protection`;
// `info` chooses its salt) and:
//   differs from `facts`  integrity error: an interposer rewrote the plain read;
//   equal                 facts.identity_origin becomes kAudited, decided again;
//   protection.unsalted   no audited read (an unsalted audit session is
//                         forgeable): the floor stays, identity_note says why.
// One audited read at most; none when the decision does not lower protection.
Result<PolicyDecision> decide_on_tpm(const Policy& policy, TpmFacts& facts, Tpm& tpm,
                                     const ProtectionConfig& protection, const TpmInfo* info);

// Whether every TPM `later` matches is also matched by `earlier` (so a
// `later` placed after `earlier` can never match).
bool covers(const PolicyRule& earlier, const PolicyRule& later);

// The rule as a [[rule]] table in the policy format (parse_policy reads it back).
std::string to_toml(const PolicyRule& rule);

}  // namespace tpmsec

#endif  // TPMSEC_POLICY_POLICY_H_
