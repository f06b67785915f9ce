// Linux IMA measurement logs: parsing, and the PCR values a log implies. No TPM is involved.
// Reads the kernel's two renderings of the same list, ascii_runtime_measurements (parse_ascii_log) and
// binary_runtime_measurements (parse_binary_log), and their per-bank forms (Linux 6.10+:
// *_runtime_measurements_<algo>, whose template-hash column is the bank's digest, `hash_bank` below), for
// the kernel's built-in templates (ima, ima-ng, ima-ngv2, ima-sig, ima-sigv2, ima-buf, ima-modsig,
// evm-sig). Only little-endian binary lists are read (every common platform, and ima_canonical_fmt).
// Input is hostile: every length is bounded and every field checked against its template's layout; each
// entry's template data is rebuilt in the kernel's layout and its hash checked against the logged one,
// except for violations (all zeros), for which the kernel extends 0xFF…FF into every bank.
// Errors: parsing never stops at a bad entry when the next one can be found: a bad entry becomes a
// Problem and the good ones are kept (replay `entries`, or stop at `entries_before_first_problem()`); a
// binary framing error ends the parse with a final Problem. A partial last entry (a log read while the
// kernel appended to it) is named in `tail` and is also the last Problem. Result errors (kParse,
// kUnsupported) where the functions below say. Pure functions and values: thread-safe.
// Layouts, bounds, sources: docs/replay.md, "IMA: ascii_runtime_measurements and
// binary_runtime_measurements", and "The parsers' contracts (include/tpmsec/replay/)".
#ifndef TPMSEC_REPLAY_IMA_LOG_H_
#define TPMSEC_REPLAY_IMA_LOG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::ima {

inline constexpr size_t kTemplateHashSize = 20;        // SHA-1, the classic lists' template-hash column
inline constexpr size_t kMaxTemplateNameLength = 255;  // bytes of a template name
inline constexpr size_t kMaxTemplateDataSize = 64 * 1024;
inline constexpr size_t kEventNameLenMax = 255;  // IMA_EVENT_NAME_LEN_MAX: the "ima" template's n field
inline constexpr uint32_t kMaxPcrIndex = 63;
inline constexpr size_t kMaxFileDigestSize = 64;  // d / d-ng digests (SHA-512 is the largest)

enum class LogFormat { kAscii, kBinary };

// One measurement, decoded. Fields a template lacks stay empty.
struct Entry {
  uint32_t pcr = 0;
  std::string template_name;  // "ima", "ima-ng", "ima-ngv2", "ima-sig", "ima-sigv2", "ima-buf", "ima-modsig", "evm-sig"
  Bytes template_hash;        // as logged: H_hash_bank(template_data), all zero for a violation
  bool violation = false;     // template_hash is all zero: 0xFF…FF is extended instead

  // The template's fields.
  std::string file_digest_algorithm;  // d-ng's algorithm name ("sha256"); empty for the "ima" template's d
  std::string file_digest_type;       // d-ngv2's digest type ("ima", "verity"); empty otherwise
  Bytes file_digest;                  // d (20 bytes), d-ng or d-ngv2
  std::string event_name;             // n / n-ng, without the NUL
  Bytes signature;                    // sig (ima-sig); may be empty
  Bytes buffer;                       // buf (ima-buf); may be empty
  // Fields tpmsec does not interpret (d-modsig, modsig, evmsig, xattr*, iuid,
  // igid, imode), by field id, as the kernel keeps them in the template data.
  std::vector<std::pair<std::string, Bytes>> other_fields;

  // The bytes the kernel hashes into the template hash and the bank digests.
  // For every template but "ima" this is exactly the binary log's template data.
  Bytes template_data;

  // Where the entry was read: for ascii the 1-based line and the byte offset of
  // its start; for binary line 0 and the byte offset of the entry.
  size_t line = 0;
  size_t offset = 0;
};

// A line or entry that was rejected. The message names the place and what is
// wrong: "line 7: template 'ima-ng' expects 2 fields, got 1",
// "entry 3 at offset 412: template data size 70000 above 65536".
struct Problem {
  // How many good entries precede this one in the log: entries[0, entry_index)
  // are those before it, so a caller stopping at the first problem cuts there.
  size_t entry_index = 0;
  size_t line = 0;    // 1-based line (ascii), 0 for binary
  size_t offset = 0;  // byte offset of the line (ascii) or the entry (binary)
  // kIntegrity for a template hash that does not match the rebuilt template
  // data; kParse for everything else.
  Error error{ErrorKind::kParse, ""};
};

// A partial entry at the end of the input.
struct Tail {
  size_t offset = 0;  // where it starts
  size_t bytes = 0;   // to the end of the input
};

struct ParsedLog {
  LogFormat format = LogFormat::kAscii;
  // The bank of the template-hash column: sha1 for the classic lists, the
  // file's bank for a per-bank list (0 when no entry was read).
  uint16_t hash_bank = 0;
  std::vector<Entry> entries;     // the good entries, in log order
  std::vector<Problem> problems;  // the rejected ones, in log order
  // False when parsing had to stop before the end of the input (binary framing
  // error); the last Problem says where.
  bool complete = true;
  // Set when the input ends in a partial entry (above); problems.back() is it.
  std::optional<Tail> tail;

  bool ok() const { return problems.empty(); }
  // The entries before the first problem (all of them when there is none): what
  // a caller that refuses to go past a bad entry replays.
  std::span<const Entry> entries_before_first_problem() const;
};

// Which rendering `content` is, judged from its first entry; nullopt when it is
// neither (or empty).
std::optional<LogFormat> detect_format(ByteView content);

// The bank a per-bank list's file name gives: "…/ascii_runtime_measurements_
// sha256" is sha256 ("_sm3" and "_sm3_256" are sm3_256, "_tpm_alg_N" the
// algorithm with hex id N); nullopt for any other name (the classic lists).
std::optional<uint16_t> bank_from_file_name(std::string_view path);

// Parses ascii_runtime_measurements: one entry per '\n'-terminated line
// ("PCR template-hash template-name field…"); empty lines are ignored.
// `hash_bank`: the template-hash column's bank; without it, the first line's
// column size decides (20 bytes sha1, 32 sha256, 48 sha384, 64 sha512: an
// sm3_256 list must be named, by its file name or the caller).
ParsedLog parse_ascii_log(std::string_view text, std::optional<uint16_t> hash_bank = std::nullopt);

// Parses binary_runtime_measurements. Messages number entries from 0 in file
// order, bad ones included ("entry 3 at offset 412: …"). Without `hash_bank`,
// the size of the first entry's hash is the one (20, 32, 48 or 64 bytes, the
// smallest first) after which a supported template's name follows.
ParsedLog parse_binary_log(ByteView data, std::optional<uint16_t> hash_bank = std::nullopt);

// detect_format() then the matching parser; kParse when `content` is empty or
// neither format.
Result<ParsedLog> parse_log(ByteView content, std::optional<uint16_t> hash_bank = std::nullopt);

// The digest the kernel extends into bank `bank` (a TPM_ALG_ID) for `entry`:
// H_bank(template_data), or 0xFF repeated to the bank's digest size for a
// violation. kUnsupported for a bank tpmsec cannot hash.
Result<Bytes> extend_digest(const Entry& entry, uint16_t bank);

// The values the PCRs of bank `bank` hold after extending every entry in order,
// each PCR starting from zeros; keyed by PCR index, only the PCRs the entries
// extend.
Result<std::map<uint32_t, Bytes>> replay(std::span<const Entry> entries, uint16_t bank);

// The value of one PCR after `entries` (zeros when no entry extends it).
Result<Bytes> expected_pcr(std::span<const Entry> entries, uint16_t bank, uint32_t pcr);

}  // namespace tpmsec::ima

#endif  // TPMSEC_REPLAY_IMA_LOG_H_
