// A latency profile (issue #4): what an emulated TPM answers in how long.
// Data only; profile_file.h finds, reads, validates and writes the files
// (data/profiles/NAME.json), latency_model.h draws latencies from a profile.
//
// A profile holds, per command variant, a latency with its provenance tag
// (docs/latency-profiles.md: M measured, D derived from a measured loop, P proxy,
// E estimate with the rule stated, B bound) and source (S1..S16, E rule),
// plus the added cost of an HMAC session and of parameter encryption per
// byte, optional tail events (Infineon's ~2.25 s context stalls), a seed,
// the identity the emulated TPM reports and the chip's slot limits.
#ifndef TPMSEC_EMULATION_LATENCY_PROFILE_H_
#define TPMSEC_EMULATION_LATENCY_PROFILE_H_

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpmsec {

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
  std::string manufacturer;                   // "IFX", "STM ", "NTC"
  std::array<std::string, 4> vendor_strings;  // "SLB9", "670", "", ""
  std::string firmware;                       // "7.85": TPM_PT_FIRMWARE_VERSION_1 high.low
  std::string bus;                            // "SPI 43 MHz"
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

// The variants every profile must give a value for; variant_of()
// (command_variant.h) yields these (and bare command names, which fall back
// to "default").
inline constexpr std::array<std::string_view, 15> kRequiredVariants = {
    "PCR_Extend",
    "PCR_Read",
    "GetRandom",
    "StartAuthSession.unsalted",
    "StartAuthSession.ecc",
    "StartAuthSession.rsa",
    "ContextLoad.object",
    "ContextLoad.session",
    "ContextSave.object",
    "ContextSave.session",
    "FlushContext",
    "CreatePrimary.ecc",
    "CreatePrimary.rsa",
    "Hash",
    "default",
};

struct LatencyProfile {
  std::string id;    // the file's stem: "slb9670"
  std::string name;  // "Infineon OPTIGA SLB9670"
  std::string note;  // what the profile's numbers are, in a sentence or two
  ProfileIdentity identity;
  std::map<std::string, LatencyValue> commands;  // variant -> latency
  LatencyValue hmac_session;                     // added when a command carries a non-password session
  LatencyValue param_encryption_per_byte;        // added per encrypted parameter byte
  std::vector<TailEvent> tail_events;
  uint64_t seed = 0;
  SlotLimits slots;
  bool operator==(const LatencyProfile&) const = default;
};

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_LATENCY_PROFILE_H_
