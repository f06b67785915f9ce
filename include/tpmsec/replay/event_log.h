// The TCG PC Client crypto-agile event log (firmware measurements, as Linux exposes them in
// /sys/kernel/security/tpm0/binary_bios_measurements): parsing, and the PCR values it implies. No TPM is
// involved. Layout: TCG PC Client Platform Firmware Profile §10 (one TCG_PCR_EVENT carrying the Spec ID
// event, then TCG_PCR_EVENT2 to the end), all integers little-endian; a log in the older SHA-1 format is
// read as one sha1 bank.
// Input is hostile: every count and size is bounded and read through the bounds-checked Reader.
// Errors: the first malformed byte fails the whole parse with kParse, naming the event ("event 5 at offset
// 1234: …"); events are numbered from 0, the Spec ID event being event 0, as tpm2_eventlog does.
// Replay: EV_NO_ACTION events are never extended; PCR 0 starts at zeros with a locality in its last byte
// (4 after an EV_EFI_HCRTM_EVENT, else a StartupLocality event's, else 0; either after a PCR 0 extend, or
// twice, is an error); every other PCR starts at zero. Replay uses the digests the log records, never
// recomputed from the event data. Pure functions and values: thread-safe.
// The layout field by field, the Spec ID quirk (EventLog::spec_id_note) and the sources: docs/replay.md,
// "TCG crypto-agile event log: binary_bios_measurements", and "The parsers' contracts
// (include/tpmsec/replay/)".
#ifndef TPMSEC_REPLAY_EVENT_LOG_H_
#define TPMSEC_REPLAY_EVENT_LOG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::event_log {

inline constexpr uint32_t kEvNoAction = 0x00000003;
inline constexpr uint32_t kEvEfiHcrtmEvent = 0x80000010;
inline constexpr uint8_t kHcrtmLocality = 4;               // PCR 0's last byte after _TPM_Hash_Start
inline constexpr size_t kMaxAlgorithms = 16;               // numberOfAlgorithms, and digests per event
inline constexpr size_t kMaxDigestSize = 64;               // TPMU_HA: SHA-512
inline constexpr size_t kMaxEventSize = 16 * 1024 * 1024;  // eventSize of one event
inline constexpr uint32_t kPcrCount = 32;                  // extended events name PCRs 0-31

struct AlgorithmSize {
  uint16_t algorithm = 0;  // TPM_ALG_ID
  uint16_t digest_size = 0;
};

// TCG_EfiSpecIdEvent, the first event's data.
struct SpecIdEvent {
  uint32_t platform_class = 0;
  uint8_t spec_version_minor = 0;
  uint8_t spec_version_major = 0;
  uint8_t spec_errata = 0;
  uint8_t uintn_size = 0;
  std::vector<AlgorithmSize> algorithms;  // the banks the log records, in order
  Bytes vendor_info;
};

struct TaggedDigest {
  uint16_t algorithm = 0;
  Bytes digest;
};

// One TCG_PCR_EVENT2.
struct Event {
  size_t index = 0;   // from 1 (event 0 is the Spec ID event); from 0 in a SHA-1 log
  size_t offset = 0;  // byte offset of the event in the log
  uint32_t pcr = 0;
  uint32_t event_type = 0;
  std::vector<TaggedDigest> digests;
  Bytes data;

  // The digest for `algorithm`, or nullptr when the event has none.
  const Bytes* digest_for(uint16_t algorithm) const;
};

enum class LogFormat {
  kCryptoAgile,  // TCG_PCR_EVENT2 after a "Spec ID Event03" event
  kSha1,         // TCG_PCR_EVENT throughout (TPM 1.2 style, SHA-1 only)
};

struct EventLog {
  LogFormat format = LogFormat::kCryptoAgile;
  // The Spec ID event; for a SHA-1 log, just the sha1 bank.
  SpecIdEvent spec_id;
  // Set when the Spec ID event's eventSize disagreed with where its
  // vendorInfo ends (the log is read as tpm2_eventlog reads it).
  std::string spec_id_note;
  std::vector<Event> events;                // every TCG_PCR_EVENT2, EV_NO_ACTION ones included
  std::optional<uint8_t> startup_locality;  // from the StartupLocality event, when present
  bool hcrtm = false;                       // PCR 0 opens with an EV_EFI_HCRTM_EVENT

  // The locality in PCR 0's last byte before its first extend: 4 after an
  // H-CRTM, else the StartupLocality event's, else 0.
  uint8_t pcr0_locality() const;

  // The algorithm ids of the Spec ID event, in its order.
  std::vector<uint16_t> banks() const;
};

// Parses a whole crypto-agile log (from its first byte to its last).
Result<EventLog> parse_event_log(ByteView data);

// The value of every PCR the log extends in bank `bank` (plus PCR 0 when the
// log sets its startup locality or opens with an H-CRTM) after all events,
// keyed by PCR index, each from its initial value (above).
// kUnsupported when the log has no such bank or tpmsec cannot hash it; kParse
// when an extended event lacks the bank's digest.
Result<std::map<uint32_t, Bytes>> replay_event_log(const EventLog& log, uint16_t bank);

}  // namespace tpmsec::event_log

#endif  // TPMSEC_REPLAY_EVENT_LOG_H_
