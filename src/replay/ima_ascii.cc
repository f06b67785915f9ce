// ascii_runtime_measurements: one line per entry, as the kernel's
// ima_ascii_measurements_show prints it: "%2d %s %s" (PCR, template hash in
// the list's bank: SHA-1 in the classic list, template name), then " FIELD"
// for each template field. A field may be empty
// (an unsigned file's sig), so the line is split on every single space.
// The event name is printed as it is (ima_show_template_string: "%s"), spaces
// included: an unlinked file is "/tmp/#17634599 (deleted)". Every other field
// of the templates read here is printed without a space (hex, a number,
// ALGORITHM:HEX; xattrnames joins names from the kernel's fixed list of EVM
// xattrs, none with a space), so the name is the run of columns the other
// fields leave: the rest of the line for ima and ima-ng, up to the fields
// after it for the others. The template hash then proves that split.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <span>
#include <vector>

#include "replay/ima_template.h"
#include "replay/printable.h"
#include "tpmsec/constants.h"
#include "tpmsec/replay/ima_log.h"

namespace tpmsec::ima {

namespace {

using internal::TemplateLayout;
using replay_internal::printable;

// Every field of a line as hex, with room for the header.
constexpr size_t kMaxLineLength = 2 * kMaxTemplateDataSize + 1024;

std::vector<std::string_view> split_on_spaces(std::string_view line) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t space = line.find(' ', start);
    if (space == std::string_view::npos) {
      parts.push_back(line.substr(start));
      return parts;
    }
    parts.push_back(line.substr(start, space - start));
    start = space + 1;
  }
}

// Columns [first, first + count) of `parts` as the one stretch of the line
// they are, the spaces between them included.
std::string_view columns(std::span<const std::string_view> parts, size_t first, size_t count) {
  const char* begin = parts[first].data();
  const std::string_view& last = parts[first + count - 1];
  return std::string_view(begin, static_cast<size_t>(last.data() + last.size() - begin));
}

bool is_name_field(internal::Field f) { return f == internal::Field::kEventName || f == internal::Field::kEventNameNg; }

Result<uint32_t> parse_pcr(std::string_view text) {
  uint32_t pcr = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pcr);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return parse_error(fmt::format("PCR '{}' is not a decimal number", printable(text)));
  }
  if (pcr > kMaxPcrIndex) return parse_error(fmt::format("PCR {} is above {}", pcr, kMaxPcrIndex));
  return pcr;
}

// `hash_bank`: the list's, once known; set from the first line's column
// when it is not.
Result<Entry> parse_line(std::string_view line, std::optional<uint16_t>& hash_bank) {
  if (line.size() > kMaxLineLength) {
    return parse_error(fmt::format("line is {} bytes long, at most {} allowed", line.size(), kMaxLineLength));
  }
  // "%2d" pads PCRs below 10 with a space.
  size_t first = line.find_first_not_of(' ');
  if (first == std::string_view::npos) return parse_error("line holds only spaces");
  std::vector<std::string_view> parts = split_on_spaces(line.substr(first));
  if (parts.size() < 3) {
    return parse_error(fmt::format("expected 'PCR template-hash template-name field…', got {} column{}", parts.size(),
                                   parts.size() == 1 ? "" : "s"));
  }
  Entry entry;
  TPMSEC_ASSIGN_OR_RETURN(entry.pcr, parse_pcr(parts[0]));

  Result<Bytes> hash = from_hex(parts[1]);
  std::optional<uint16_t> bank = hash_bank;
  if (hash.ok() && !bank) bank = internal::bank_of_hash_size(hash->size());
  if (!hash.ok() || !bank || hash->size() != digest_size(*bank)) {
    return parse_error(
        bank ? fmt::format("template hash '{}' is not {} hex digits ({})", printable(parts[1]), 2 * *digest_size(*bank),
                           hash_name(*bank))
             : fmt::format("template hash '{}' is not 40, 64, 96 or 128 hex digits", printable(parts[1])));
  }
  entry.template_hash = std::move(*hash);

  const TemplateLayout* layout = internal::find_template(parts[2]);
  if (layout == nullptr) {
    return parse_error(
        fmt::format("template '{}' is not supported ({})", printable(parts[2]), internal::supported_templates()));
  }
  entry.template_name = std::string(layout->name);
  const size_t fields = parts.size() - 3;
  const bool has_name = std::any_of(layout->fields.begin(), layout->fields.end(), is_name_field);
  if (fields < layout->fields.size() || (fields > layout->fields.size() && !has_name)) {
    return parse_error(
        fmt::format("template '{}' expects {} fields, got {}", layout->name, layout->fields.size(), fields));
  }
  // The name takes the columns beyond the template's field count.
  const size_t surplus = fields - layout->fields.size();
  size_t column = 3;
  for (internal::Field field : layout->fields) {
    const size_t count = is_name_field(field) ? 1 + surplus : 1;
    TPMSEC_RETURN_IF_ERROR(internal::decode_ascii_field(field, columns(parts, column, count), entry));
    column += count;
  }
  TPMSEC_RETURN_IF_ERROR(internal::finish_entry(*layout, *bank, entry));
  hash_bank = bank;
  return entry;
}

}  // namespace

ParsedLog parse_ascii_log(std::string_view text, std::optional<uint16_t> hash_bank) {
  ParsedLog log;
  log.format = LogFormat::kAscii;
  if (hash_bank && !digest_size(*hash_bank)) {
    log.problems.push_back(
        Problem{0, 0, 0, parse_error(fmt::format("template-hash bank 0x{:04x} is unknown", *hash_bank))});
    log.complete = false;
    return log;
  }
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    const bool unterminated = end == std::string_view::npos;
    if (unterminated) end = text.size();
    std::string_view line = text.substr(start, end - start);
    // A log copied through another system may end its lines with CRLF.
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_number;
    if (!line.empty()) {
      Result<Entry> entry = parse_line(line, hash_bank);
      if (entry.ok()) {
        entry->line = line_number;
        entry->offset = start;
        log.entries.push_back(std::move(*entry));
      } else {
        log.problems.push_back(Problem{log.entries.size(), line_number, start,
                                       entry.error().with_context(fmt::format("line {}", line_number))});
        // The kernel ends every line: a last one without its '\n' that does
        // not parse was cut short.
        if (unterminated) log.tail = Tail{start, text.size() - start};
      }
    }
    start = end + 1;
  }
  log.hash_bank = hash_bank.value_or(0);
  return log;
}

}  // namespace tpmsec::ima
