// Latency emulation (issue #4): a real TPM (embedded by default, so every
// output is genuine) behind a latency model read from a profile
// (data/profiles/NAME.json), advancing a VirtualClock so that an emulated
// hour of TPM traffic passes in seconds.
//
// A profile holds, per command variant, a latency with its provenance tag
// (docs/latency-profiles.md: M measured, D derived from a measured loop, P proxy,
// E estimate with the rule stated, B bound) and source (S1..S16, E rule),
// plus the added cost of an HMAC session and of parameter encryption per
// byte, optional tail events (Infineon's ~2.25 s context stalls), a seed,
// and the identity the emulated TPM reports.
//
// The model per command: base(variant) + hmac_session (when the command
// carries a non-password session) + param_encryption_per_byte x encrypted
// bytes + jitter (normal, stddev jitter_ms per component, total truncated at
// zero) + tail events that fire. It is deterministic for a given seed and
// command sequence, on every platform (its own normal/uniform draws from
// std::mt19937_64, not the library's distributions).
#ifndef TPMSEC_LATENCY_MODEL_H_
#define TPMSEC_LATENCY_MODEL_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/bytes.h"
#include "tpmsec/clock.h"
#include "tpmsec/result.h"
#include "tpmsec/tpm_info.h"
#include "tpmsec/tracing.h"
#include "tpmsec/transport.h"

namespace tpmsec {

// ---------------------------------------------------------------- profiles

// Provenance tags, as docs/latency-profiles.md defines them.
inline constexpr char kTagMeasured = 'M';  // measured for this command on this TPM
inline constexpr char kTagDerived = 'D';   // derived from a measured loop
inline constexpr char kTagProxy = 'P';     // a measured command doing the same internal work
inline constexpr char kTagEstimate = 'E';  // estimate, rule stated in the note
inline constexpr char kTagBound = 'B';     // timeout or certification limit

bool is_valid_tag(char tag);
// "measured", "derived", "proxy", "estimate", "bound"; "?" for anything else.
std::string_view tag_name(char tag);

// One modelled latency and where it comes from. `source` names the sources
// (S1..S16 of docs/latency-profiles.md) and, for E values, the rule used; `note` says
// how the number was obtained.
// A measured per-iteration distribution (optional in a profile; for
// information and for checking a profile, the model draws from ms/jitter_ms).
struct ValueDistribution {
  uint64_t n = 0;  // iterations
  double median_ms = 0;
  double p5_ms = 0;
  double p95_ms = 0;
  double max_ms = 0;
  bool operator==(const ValueDistribution&) const = default;
};

struct LatencyValue {
  double ms = 0;         // mean (for param_encryption_per_byte: per byte)
  double jitter_ms = 0;  // standard deviation of the normal jitter
  char tag = kTagEstimate;
  std::string source;
  std::string note;
  // Optional (profiles may omit them; 0 / empty = not given):
  std::optional<double> low_ms;   // uncertainty of `ms`: the spread of run
  std::optional<double> high_ms;  // averages (M) or the rule's stated error (D/E)
  uint32_t runs = 0;              // M: measurement runs merged
  uint64_t iterations = 0;        // M: iterations over those runs
  std::optional<ValueDistribution> distribution;
  bool operator==(const LatencyValue&) const = default;
};

// A rare extra delay: each command whose variant matches `variant` (a glob:
// '*' matches any run of characters, e.g. "ContextLoad.*") draws once and,
// with `probability`, takes `extra_ms` more (modelled at that value).
// Events with enabled == false are listed but only drawn when
// ModelOptions::tail_events turns every event on.
struct TailEvent {
  std::string variant;
  double probability = 0;
  double extra_ms = 0;
  char tag = kTagEstimate;
  std::string source;
  std::string note;
  bool enabled = true;
  bool operator==(const TailEvent&) const = default;
};

// The identity an emulated TPM reports (TPM_PT_MANUFACTURER, vendor strings,
// firmware version) and its bus. Strings are at most 4 bytes each, as the
// TPM properties carry them; an empty firmware means unknown.
struct ProfileIdentity {
  std::string manufacturer;                  // "IFX", "STM ", "NTC"
  std::array<std::string, 4> vendor_strings;  // "SLB9", "670", "", ""
  std::string firmware;                      // "7.85": TPM_PT_FIRMWARE_VERSION_1 high.low
  std::string bus;                           // "SPI 43 MHz"
  std::string source;
  std::string note;
  bool operator==(const ProfileIdentity&) const = default;
};

// Session and object slots of the real part, for information (0: unknown).
// The last two are optional in a profile: TPM_PT_ACTIVE_SESSIONS_MAX and
// TPM_PT_CONTEXT_GAP_MAX as the TPM reports them.
struct SlotLimits {
  uint32_t max_loaded_sessions = 0;
  uint32_t max_transient_objects = 0;
  uint32_t active_sessions_max = 0;
  uint32_t context_gap_max = 0;
  std::string source;
  std::string note;
  bool operator==(const SlotLimits&) const = default;
};

// The variants every profile must give a value for; variant_of() yields
// these (and bare command names, which fall back to "default").
inline constexpr std::array<std::string_view, 15> kRequiredVariants = {
    "PCR_Extend",         "PCR_Read",           "GetRandom",           "StartAuthSession.unsalted",
    "StartAuthSession.ecc", "StartAuthSession.rsa", "ContextLoad.object", "ContextLoad.session",
    "ContextSave.object", "ContextSave.session", "FlushContext",        "CreatePrimary.ecc",
    "CreatePrimary.rsa",  "Hash",               "default",
};

struct LatencyProfile {
  std::string id;    // the file's stem: "slb9670"
  std::string name;  // "Infineon OPTIGA SLB9670"
  std::string note;  // what the profile's numbers are, in a sentence or two
  ProfileIdentity identity;
  std::map<std::string, LatencyValue> commands;  // variant -> latency
  LatencyValue hmac_session;               // added when a command carries a non-password session
  LatencyValue param_encryption_per_byte;  // added per encrypted parameter byte
  std::vector<TailEvent> tail_events;
  uint64_t seed = 0;
  SlotLimits slots;
  bool operator==(const LatencyProfile&) const = default;
};

// The directory shipped profiles live in: data_dir()/profiles.
std::string profiles_dir();

// The file a profile argument names: a bare name (letters, digits, '.', '_',
// '-', not ending in ".json") is profiles_dir()/NAME.json; anything else is
// a path.
std::string profile_path(const std::string& name_or_path);

// Loads and validates a profile. Errors name the file and the problem:
// kUsage for an unknown profile name, kRuntime for an unreadable file,
// kParse for bad JSON ("line L, column C"), a missing key, a negative
// latency, an unknown tag, a wrong type or an unknown key (keys starting
// with '_' are comments and ignored).
Result<LatencyProfile> load_profile(const std::string& name_or_path);

// The same validation on JSON text; `origin` prefixes every error.
Result<LatencyProfile> parse_profile(std::string_view text, const std::string& origin);
Result<LatencyProfile> profile_from_json(const nlohmann::json& json, const std::string& origin);

// Every *.json under `dir`, sorted by id; the first bad file is an error.
Result<std::vector<LatencyProfile>> load_all_profiles(const std::string& dir = profiles_dir());

// "all" (every shipped profile) or a comma-separated list of names or paths.
Result<std::vector<LatencyProfile>> load_profiles(const std::string& list);

// The profile as its file holds it (profile_from_json(to_json(p)) == p).
nlohmann::json to_json(const LatencyProfile& profile);

// How much of a profile is measured: its tagged values (command variants,
// hmac_session, param_encryption_per_byte, tail events) counted by tag.
struct ProfileSummary {
  size_t values = 0;
  size_t measured = 0;  // M
  size_t derived = 0;   // D
  size_t proxy = 0;     // P
  size_t estimate = 0;  // E
  size_t bound = 0;     // B

  size_t measured_or_derived() const { return measured + derived; }
  // Fraction (0..1) of values tagged M or D.
  double measured_fraction() const { return values ? double(measured + derived) / double(values) : 0.0; }
  bool estimates_only() const { return values > 0 && estimate == values; }
};
ProfileSummary summarize(const LatencyProfile& profile);

// What a profile implies per PCR extend for the lifecycles of docs/strategies.md
// (means, no jitter or tails):
//   plain          PCR_Extend
//   hmac           PCR_Extend + hmac_session (resident steady state)
//   per_command    ContextLoad.object + StartAuthSession.ecc + FlushContext + hmac (Linux 6.10)
//   saved_context  ContextLoad.session + hmac + ContextSave.session
struct ExtendFigures {
  double plain_ms = 0;
  double hmac_ms = 0;
  double per_command_ms = 0;
  double saved_context_ms = 0;
  double audited_read_ms = 0;   // PCR_Read + hmac_session (a checkpoint's read)
  double start_session_ms = 0;  // StartAuthSession.ecc
  // Getting the null key loaded for a session: ContextLoad of its saved
  // context, or a fresh CreatePrimary (ECC, RSA).
  double reload_null_key_ms = 0;      // ContextLoad.object
  double create_null_key_ms = 0;      // CreatePrimary.ecc
  double create_null_key_rsa_ms = 0;  // CreatePrimary.rsa
};
ExtendFigures extend_figures(const LatencyProfile& profile);

// ---------------------------------------------------------------- uncertainty
//
// Every value has a range (docs/latency-profiles.md, "Uncertainty"): the
// profile's low_ms/high_ms where it states them (the runs' spread for M, the
// rule's validated error for D), otherwise the default of its tag, from this
// one place:
//   M  ms -/+ 1.645 x jitter_ms (the p5-p95 band of its measured spread)
//   D  ms / (1 + e) to ms / (1 - e), e = the largest validated rule error
//      (kRuleErrors in algtest_import.h: 0.40; a rule's error is
//      derived / measured - 1, so the measured value lies in that interval)
//   P  as D (a related operation measured on the same chip)
//   E  ms / 2 to ms x 2 (kEstimateFactor: not validated)
//   B  0 to ms (a bound)
// The relative error e for tags D and P (0 for the others, whose ranges are not of that form).
double default_relative_error(char tag);
inline constexpr double kEstimateFactor = 2.0;

struct ValueRange {
  double low_ms = 0;
  double high_ms = 0;
  bool stated = false;  // the profile gives low_ms/high_ms; false: the tag's default
};
ValueRange value_range(const LatencyValue& value);
// "stated" or "default for M: p5-p95 of the jitter" etc., for reports.
std::string range_origin(const LatencyValue& value);

enum class RangeEnd { kLow, kHigh };
// The profile with every value (command variants, hmac_session,
// param_encryption_per_byte) at the low or high end of its range; jitter,
// seed and tail events unchanged. Any figure computed from it (extend_figures,
// a priced replay) is that figure's low or high end: one formula for the
// central figure and its range.
LatencyProfile profile_at(const LatencyProfile& profile, RangeEnd end);
// The profile with only its E values kept (every other value, every jitter
// and the tail events gone): a figure computed from it is the part that
// rests on estimates.
LatencyProfile estimated_part(const LatencyProfile& profile);

// A figure with its range for JSON outputs: {"ms", "low_ms", "high_ms",
// "estimated_share"} (ms to three decimals; the share of ms from E values, 0..1, to two).
nlohmann::json range_json(double ms, double low_ms, double high_ms, double estimated_ms);

// The warning to show when an emulation uses `profile`: non-empty when
// every value is an estimate (docs/latency-profiles.md: such a profile must say so).
std::string provenance_warning(const LatencyProfile& profile);

// ---------------------------------------------------------------- variants

// The variant a command is modelled as:
//   StartAuthSession.unsalted / .ecc / .rsa  (salted: encryptedSalt of 128
//                                             bytes or more is RSA, e.g. 256;
//                                             shorter is ECC, e.g. 68)
//   ContextLoad.session / .object            (savedHandle top byte 0x02/0x03
//   ContextSave.session / .object             is a session, else an object)
//   CreatePrimary.ecc / .rsa                  (the shape's object_type; other
//                                             or unreadable types: "CreatePrimary")
//   otherwise the command's name ("PCR_Extend", or hex for unknown codes).
std::string variant_of(const CommandShape& shape);

// Approximate bytes of encrypted parameter in a command (decrypt attribute)
// and its response (encrypt attribute): the byte counts less the header and
// one SHA-256 authorization envelope per session (handles are not
// subtracted), so an upper bound on the parameter sizes.
size_t encrypted_parameter_bytes(const CommandShape& shape);

// ---------------------------------------------------------------- the model

struct ModelOptions {
  std::optional<uint64_t> seed;      // default: the profile's
  std::optional<bool> tail_events;   // true: all on; false: all off; default: each event's `enabled`
  double jitter_scale = 1.0;         // 0 turns jitter off
};

// One modelled command, by component (all in ms).
struct ModelledLatency {
  std::string variant;
  double base_ms = 0;        // the variant's mean
  double hmac_ms = 0;        // hmac_session mean, when it applies
  double encryption_ms = 0;  // per-byte cost x encrypted_parameter_bytes
  double jitter_ms = 0;      // the drawn jitter (after truncation at zero)
  double tail_ms = 0;        // tail events that fired
  double total_ms = 0;       // base + hmac + encryption + jitter + tail, >= 0
};

class LatencyModel {
 public:
  explicit LatencyModel(LatencyProfile profile, ModelOptions options = {});

  // The latency of one command; advances the random state.
  double latency_ms(const CommandShape& shape) { return model(shape).total_ms; }
  ModelledLatency model(const CommandShape& shape);

  // The value used for `variant`: exact match, else the command name before
  // the first '.', else "default".
  const LatencyValue& value_for(const std::string& variant) const;

  // Restarts the random sequence.
  void reseed(uint64_t seed);

  const LatencyProfile& profile() const { return profile_; }
  uint64_t seed() const { return seed_; }

 private:
  double uniform();  // [0, 1)
  double normal();   // standard normal (Box-Muller, one value per two draws)
  bool tail_enabled(const TailEvent& event) const;

  LatencyProfile profile_;
  ModelOptions options_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// A transport decorator that makes the TPM it wraps take the modelled time:
// each transmit() measures the real time spent in the inner transport and
// calls clock.adjust(modelled - real), so every reading of `clock` after it
// includes the modelled TPM latency instead of the real one. A failed inner
// transmission is not modelled (its real time stays). Host work outside
// transmit() stays real. To record modelled durations, put a
// TracingTransport reading the same VirtualClock outside this decorator.
// Not thread-safe.
//
// The chip's session and object slots and context gap (the profile's
// SlotLimits) are enforced below the model by a SlotLimitTransport
// (slot_limits.h): a refused command is answered with the chip's error code
// and modelled like any other answer.
class SlotLimitTransport;
class LatencyTransport final : public Transport {
 public:
  LatencyTransport(Transport& inner, LatencyModel model, VirtualClock& clock);
  ~LatencyTransport() override;

  Result<Bytes> transmit(ByteView command) override;
  Status reset_tpm() override;
  Status suspend_resume() override;
  // inner's description + " emulating PROFILE".
  std::string describe() const override;
  bool in_process() const override { return inner_.in_process(); }
  bool private_handles() const override { return inner_.private_handles(); }
  bool outlives_process() const override { return inner_.outlives_process(); }

  LatencyModel& model() { return model_; }
  const LatencyModel& model() const { return model_; }
  // The last modelled command (empty before the first).
  const std::optional<ModelledLatency>& last() const { return last_; }
  size_t commands() const { return commands_; }
  int64_t modelled_ns() const { return modelled_ns_; }  // total modelled TPM time
  int64_t real_ns() const { return real_ns_; }          // total real time it replaced
  // The slot enforcement between this and the wrapped TPM.
  SlotLimitTransport& slots() { return *slots_; }
  // Real time (`tpmsec emulate --clock real`): from now on each transmit()
  // returns only once its modelled time has also passed on the host's
  // steady clock, as the chip would answer; the clock is still adjusted by
  // modelled - real, so it reads the same as without. `*cut_short` turning
  // true ends a wait early (a signal stopping a server); nullptr: none.
  void pace_in_real_time(const std::atomic<bool>* cut_short) {
    paced_ = true;
    cut_short_ = cut_short;
  }

 private:
  Transport& inner_;
  std::unique_ptr<SlotLimitTransport> slots_;
  LatencyModel model_;
  VirtualClock& clock_;
  std::optional<ModelledLatency> last_;
  bool paced_ = false;
  const std::atomic<bool>* cut_short_ = nullptr;
  size_t commands_ = 0;
  int64_t modelled_ns_ = 0;
  int64_t real_ns_ = 0;
};

// ---------------------------------------------------------------- identity

// What an emulated TPM reports: the profile's manufacturer, vendor strings
// and firmware over the real TPM's capabilities (PCR banks, algorithms,
// slots), marked emulated, with the real identity kept for honesty.
struct EmulatedIdentity {
  TpmInfo info;
  bool emulated = true;
  std::string profile;       // profile id
  std::string profile_name;  // profile display name
  std::string bus;           // the profile's bus
  std::string real_manufacturer;
  std::string real_vendor;
  std::string real_firmware;
};
EmulatedIdentity emulated_info(const LatencyProfile& profile, const TpmInfo& real);

// to_json(TpmInfo) plus "emulated": true, "profile", "profile_name", "bus"
// and "real": {manufacturer, vendor, firmware_version}.
nlohmann::json to_json(const EmulatedIdentity& identity);
// to_text(TpmInfo) plus the emulation lines.
std::string to_text(const EmulatedIdentity& identity);

// Four characters as a TPM property value ("IFX" -> 0x49465800): big-endian,
// NUL-padded (at most 4 bytes are used).
uint32_t property_value(std::string_view text);
// "7.85" -> 0x00070055; 0 for empty or unparsable text.
uint32_t firmware_value(std::string_view text);

}  // namespace tpmsec

#endif  // TPMSEC_LATENCY_MODEL_H_
