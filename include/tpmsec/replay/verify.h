// Does a measurement log explain a machine's PCRs? The values a firmware event log and/or an IMA list
// imply, compared per bank and PCR with values from elsewhere (a TPM, a file of expected values, a quote's
// PCR digest), naming where the log and the values part. No TPM is involved here: the caller reads one
// (tpmsec verify --tpm reads through an audited session).
// - The log's values start as the PC Client profile says (event_log.h); an IMA list's entries extend after
//   the firmware log's events for the same PCR. A PCR no log extends must hold its reset value
//   (reset_value): a tampered PCR cannot pass by being left out of the log.
// - A PCR matches when the given value equals the log's value. Otherwise the log's chain of values is
//   searched: a value equal to the value after event k is, for an IMA list read after the PCR, a match
//   of those k entries (`covered`), and for a firmware log a mismatch (`first_apart` names event k + 1);
//   a value equal to no point of the chain is a mismatch naming the PCR's first event.
// Errors: input files are hostile: every count, size and index is bounded; a bad one is an error value
// (Result), never a match. Pure functions and values: thread-safe.
// Why the chain is searched and how verifiers read a live list: docs/replay.md, "tpmsec verify", and
// "The parsers' contracts (include/tpmsec/replay/)".
#ifndef TPMSEC_REPLAY_VERIFY_H_
#define TPMSEC_REPLAY_VERIFY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/replay/event_log.h"
#include "tpmsec/replay/ima_log.h"
#include "tpmsec/result.h"
#include "tpmsec/structures.h"

namespace tpmsec::verify {

// PCR values by bank (TPM_ALG_ID) and index.
using PcrValues = std::map<uint16_t, std::map<uint32_t, Bytes>>;

// One extend of the log: what it was, and the PCR's value after it.
struct Step {
  std::string what;  // "event 12 at offset 3456 (type 0x4)", "IMA entry 3 (line 4)"
  bool ima = false;
  Bytes after;
};

// What the logs imply for one PCR of one bank.
struct Implied {
  Bytes initial;            // before the first step
  std::vector<Step> steps;  // in log order
  const Bytes& value() const { return steps.empty() ? initial : steps.back().after; }
};
using ImpliedValues = std::map<uint16_t, std::map<uint32_t, Implied>>;

// The value of a PCR no log extends: its reset value. TCG PC Client Platform
// TPM Profile (PTP) for TPM 2.0, "PCR Attributes": TPM2_Startup(CLEAR) sets
// PCRs 0-16 and 23 to zeros, PCR 0 with the startup locality in its last
// byte (taken from `log`: pcr0_locality(); 0 without a log), and PCRs 17-22,
// resettable only from locality 4 (or by a DRTM sequence, which sets them to
// zeros before it extends them), to all ones. libtpms, the reference TPM
// the tests run, does the same (PCRStartup: "If the reset locality of the PCR
// is 4, then the reset value is all one's").
Bytes reset_value(uint16_t bank, uint32_t pcr, const event_log::EventLog* log);

// Adds to `implied`, for each of its banks, every PCR of `given` that no log
// extends, as a chain of no steps from reset_value(): a value other than
// that is an extend no log records.
void add_unextended(ImpliedValues& implied, const PcrValues& given, const event_log::EventLog* log);

// The chains `log` and/or `ima` imply for `bank`. kUnsupported when the
// firmware log has no such bank or tpmsec cannot hash it; kParse when an
// extended event lacks the bank's digest.
Result<std::map<uint32_t, Implied>> implied_values(const event_log::EventLog* log, std::span<const ima::Entry> ima,
                                                   uint16_t bank);

enum class Verdict {
  kMatch,     // the given value is the log's value
  kCovered,   // IMA only: the given value is the log's after `covered` entries; the rest came later
  kDiffers,   // anything else
  kNotGiven,  // the values do not include this PCR
};

struct PcrResult {
  uint16_t bank = 0;
  uint32_t pcr = 0;
  Verdict verdict = Verdict::kNotGiven;
  Bytes expected;  // the log's value
  Bytes actual;    // the given value (empty when not given)
  size_t events = 0;
  size_t covered = 0;       // steps whose chain the given value holds (kCovered, or a prefix under kDiffers)
  std::string first_apart;  // the first step the given value does not hold (kDiffers, kCovered)
  std::string message;      // one line saying what was found
};

// Compares every implied PCR with `actual`.
std::vector<PcrResult> compare(const ImpliedValues& implied, const PcrValues& actual);

// A file of expected values: tpm2_pcrread's YAML ("sha256:" then "  0 : 0x…"
// lines; tpm2_eventlog's "pcrs:" section has the same shape) or JSON
// ({"sha256": {"0": "hex", …}}, hex with or without 0x). kParse naming the
// line or key for anything else; sizes are checked against the bank.
Result<PcrValues> parse_expected_values(std::string_view text);

// TPMS_ATTEST of a quote (TPM 2.0 Part 2 §10.12.12), as tpm2_quote -m writes
// it (a TPM2B_ATTEST, size first, is read too).
struct Quote {
  Bytes qualified_signer;
  Bytes extra_data;
  uint64_t clock = 0;
  uint32_t reset_count = 0;
  uint32_t restart_count = 0;
  uint64_t firmware_version = 0;
  PcrSelectionList selection;
  Bytes pcr_digest;
};
Result<Quote> parse_quote(ByteView data);

// The quote's PCR digest for `values`: H(the selected PCRs' values, banks in
// the selection's order, PCRs ascending) with `hash`; an error naming a
// selected PCR `values` lacks (kUsage).
Result<Bytes> quote_pcr_digest(const PcrSelectionList& selection, const PcrValues& values, uint16_t hash);

// The hashes whose size is the digest's (the quote does not say which hash
// signed it): sha1, sha256 and sm3_256, sha384, sha512.
std::vector<uint16_t> hashes_of_size(size_t size);

}  // namespace tpmsec::verify

#endif  // TPMSEC_REPLAY_VERIFY_H_
