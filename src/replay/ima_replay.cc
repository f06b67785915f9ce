// What an IMA log implies: format detection, the digest each entry extends,
// and the PCR values after the whole list.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>

#include "replay/ima_template.h"
#include "replay/little_endian.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/pcr.h"
#include "tpmsec/replay/ima_log.h"

namespace tpmsec::ima {

namespace {

bool is_hex_digit(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "NN <hex> " with optional leading spaces, the hex of a template-hash size:
// the start of an ascii line.
bool looks_ascii(ByteView content) {
  size_t i = 0;
  while (i < content.size() && content[i] == ' ') ++i;
  size_t digits = 0;
  while (i < content.size() && content[i] >= '0' && content[i] <= '9') ++i, ++digits;
  if (digits == 0 || digits > 3 || i >= content.size() || content[i] != ' ') return false;
  ++i;
  size_t hex = 0;
  while (i + hex < content.size() && is_hex_digit(content[i + hex])) ++hex;
  if (i + hex >= content.size() || content[i + hex] != ' ') return false;
  return std::any_of(std::begin(internal::kHashSizes), std::end(internal::kHashSizes),
                     [&](size_t size) { return hex == 2 * size; });
}

// A plausible first binary entry: a small PCR index and a printable template
// name after a template hash of one of the sizes.
bool looks_binary(ByteView content) {
  for (size_t size : internal::kHashSizes) {
    Reader r(content);
    uint32_t pcr = replay_internal::read_le32(r, "PCR index");
    r.bytes(size, "template hash");
    uint32_t name_length = replay_internal::read_le32(r, "template name length");
    if (!r.ok() || pcr > kMaxPcrIndex || name_length == 0 || name_length > kMaxTemplateNameLength) continue;
    ByteView name = r.bytes(name_length, "template name");
    if (r.ok() && std::all_of(name.begin(), name.end(), [](uint8_t c) { return c > 0x20 && c < 0x7f; })) return true;
  }
  return false;
}

}  // namespace

std::span<const Entry> ParsedLog::entries_before_first_problem() const {
  size_t n = problems.empty() ? entries.size() : std::min(problems.front().entry_index, entries.size());
  return std::span<const Entry>(entries.data(), n);
}

std::optional<LogFormat> detect_format(ByteView content) {
  if (looks_ascii(content)) return LogFormat::kAscii;
  if (looks_binary(content)) return LogFormat::kBinary;
  return std::nullopt;
}

std::optional<uint16_t> bank_from_file_name(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  for (std::string_view prefix : {"ascii_runtime_measurements_", "binary_runtime_measurements_"}) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    std::string_view algo = name.substr(prefix.size());
    // The kernel names a bank by hash_algo_name[] ("sm3" for SM3-256), and
    // one it cannot hash by its TPM algorithm id ("tpm_alg_%x").
    if (algo == "sm3") return alg::kSm3_256;
    constexpr std::string_view kTpmAlg = "tpm_alg_";
    if (algo.substr(0, kTpmAlg.size()) == kTpmAlg) {
      std::string_view hex = algo.substr(kTpmAlg.size());
      uint16_t id = 0;
      auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), id, 16);
      if (hex.empty() || ec != std::errc() || end != hex.data() + hex.size()) return std::nullopt;
      return id;
    }
    return hash_from_name(algo);
  }
  return std::nullopt;
}

Result<ParsedLog> parse_log(ByteView content, std::optional<uint16_t> hash_bank) {
  if (content.empty()) return parse_error("the IMA log is empty");
  std::optional<LogFormat> format = detect_format(content);
  if (!format) return parse_error("not an IMA log: neither the ascii nor the binary measurement list");
  if (*format == LogFormat::kAscii) {
    return parse_ascii_log(std::string_view(reinterpret_cast<const char*>(content.data()), content.size()), hash_bank);
  }
  return parse_binary_log(content, hash_bank);
}

Result<Bytes> extend_digest(const Entry& entry, uint16_t bank) {
  std::optional<uint16_t> size = digest_size(bank);
  if (!size) return unsupported_error(fmt::format("PCR bank 0x{:04x} is not a known hash", bank));
  if (entry.violation) return Bytes(*size, 0xff);
  return crypto::hash(bank, {entry.template_data});
}

Result<std::map<uint32_t, Bytes>> replay(std::span<const Entry> entries, uint16_t bank) {
  std::optional<uint16_t> size = digest_size(bank);
  if (!size) return unsupported_error(fmt::format("PCR bank 0x{:04x} is not a known hash", bank));
  std::map<uint32_t, Bytes> pcrs;
  for (const Entry& entry : entries) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes digest, extend_digest(entry, bank));
    auto [it, inserted] = pcrs.try_emplace(entry.pcr, Bytes(*size, 0));
    TPMSEC_ASSIGN_OR_RETURN(it->second, pcr_extended_value(bank, it->second, digest));
  }
  return pcrs;
}

Result<Bytes> expected_pcr(std::span<const Entry> entries, uint16_t bank, uint32_t pcr) {
  TPMSEC_ASSIGN_OR_RETURN(auto pcrs, replay(entries, bank));
  auto it = pcrs.find(pcr);
  if (it != pcrs.end()) return it->second;
  return Bytes(*digest_size(bank), 0);  // replay() checked the bank
}

}  // namespace tpmsec::ima
