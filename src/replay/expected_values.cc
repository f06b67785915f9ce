// Files of expected PCR values: tpm2_pcrread's YAML and a JSON map.
#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "replay/printable.h"
#include "tpmsec/constants.h"
#include "tpmsec/replay/verify.h"

namespace tpmsec::verify {

namespace {

using replay_internal::printable;

constexpr uint32_t kMaxPcrIndex = 31;
constexpr size_t kMaxLineLength = 1024;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

Result<uint32_t> pcr_index(std::string_view text) {
  uint32_t pcr = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pcr);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || pcr > kMaxPcrIndex) {
    return parse_error(fmt::format("'{}' is not a PCR index 0-{}", printable(text), kMaxPcrIndex));
  }
  return pcr;
}

Result<Bytes> pcr_value(uint16_t bank, std::string_view text) {
  if (text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) text.remove_prefix(2);
  Result<Bytes> value = from_hex(text);
  if (!value.ok() || value->size() != digest_size(bank)) {
    return parse_error(fmt::format("'{}' is not a {} value ({} hex digits)", printable(text), hash_name(bank),
                                   2 * *digest_size(bank)));
  }
  return value;
}

Result<uint16_t> bank_named(std::string_view name) {
  std::optional<uint16_t> bank = hash_from_name(name);
  if (!bank)
    return parse_error(fmt::format("'{}' is not a PCR bank (sha1, sha256, sha384, sha512, sm3_256)", printable(name)));
  return *bank;
}

Result<PcrValues> parse_json(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return parse_error("not a JSON object of banks");
  // tpm2_pcrread -o json style files may wrap the banks; take them as given.
  PcrValues out;
  for (const auto& [name, pcrs] : j.items()) {
    TPMSEC_ASSIGN_OR_RETURN(uint16_t bank, bank_named(name));
    if (!pcrs.is_object()) return parse_error(fmt::format("\"{}\" is not an object of PCR values", name));
    for (const auto& [index, value] : pcrs.items()) {
      Result<uint32_t> pcr = pcr_index(index);
      if (!pcr.ok()) return pcr.error().with_context(fmt::format("\"{}\"", name));
      if (!value.is_string()) return parse_error(fmt::format("\"{}\".\"{}\" is not a hex string", name, index));
      Result<Bytes> v = pcr_value(bank, value.get<std::string>());
      if (!v.ok()) return v.error().with_context(fmt::format("\"{}\".\"{}\"", name, index));
      out[bank][*pcr] = std::move(*v);
    }
  }
  return out;
}

// tpm2_pcrread's YAML: a bank line "  sha256:" and value lines "    0 : 0x…";
// other keys ("pcrs:", a leading "---") are skipped when they hold no value.
Result<PcrValues> parse_yaml(std::string_view text) {
  PcrValues out;
  std::optional<uint16_t> bank;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = trim(text.substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.size() > kMaxLineLength)
      return parse_error(fmt::format("line {}: longer than {} bytes", line_number, kMaxLineLength));
    if (line.empty() || line.front() == '#' || line == "---") continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      return parse_error(fmt::format("line {}: '{}' is no 'key: value'", line_number, printable(line)));
    std::string_view key = trim(line.substr(0, colon));
    std::string_view value = trim(line.substr(colon + 1));
    if (value.empty()) {
      // A bank, or a key that only groups banks (tpm2_eventlog's "pcrs:").
      std::optional<uint16_t> named = hash_from_name(key);
      if (named) {
        bank = named;
      } else if (key != "pcrs") {
        return parse_error(fmt::format("line {}: '{}' is not a PCR bank", line_number, printable(key)));
      }
      continue;
    }
    if (!bank) return parse_error(fmt::format("line {}: a PCR value before any bank", line_number));
    Result<uint32_t> pcr = pcr_index(key);
    if (!pcr.ok()) return pcr.error().with_context(fmt::format("line {}", line_number));
    Result<Bytes> v = pcr_value(*bank, value);
    if (!v.ok()) return v.error().with_context(fmt::format("line {}", line_number));
    out[*bank][*pcr] = std::move(*v);
  }
  return out;
}

}  // namespace

Result<PcrValues> parse_expected_values(std::string_view text) {
  std::string_view body = trim(text);
  while (!body.empty() && (body.front() == '\n' || body.front() == '\r')) body = trim(body.substr(1));
  Result<PcrValues> values = !body.empty() && body.front() == '{' ? parse_json(text) : parse_yaml(text);
  if (values.ok() && values->empty()) return parse_error("no PCR values");
  return values;
}

}  // namespace tpmsec::verify
