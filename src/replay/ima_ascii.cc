// ascii_runtime_measurements: one line per entry, as the kernel's
// ima_ascii_measurements_show prints it: "%2d %s %s" (PCR, SHA-1 template hash,
// template name), then " FIELD" for each template field. A field may be empty
// (an unsigned file's sig), so the line is split on every single space.
#include <fmt/format.h>

#include <charconv>
#include <vector>

#include "replay/ima_template.h"
#include "replay/printable.h"
#include "tpmsec/ima_log.h"

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

Result<uint32_t> parse_pcr(std::string_view text) {
  uint32_t pcr = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), pcr);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return parse_error(fmt::format("PCR '{}' is not a decimal number", printable(text)));
  }
  if (pcr > kMaxPcrIndex) return parse_error(fmt::format("PCR {} is above {}", pcr, kMaxPcrIndex));
  return pcr;
}

Result<Entry> parse_line(std::string_view line) {
  if (line.size() > kMaxLineLength) {
    return parse_error(fmt::format("line is {} bytes long, at most {} allowed", line.size(), kMaxLineLength));
  }
  // "%2d" pads PCRs below 10 with a space.
  size_t first = line.find_first_not_of(' ');
  if (first == std::string_view::npos) return parse_error("line holds only spaces");
  std::vector<std::string_view> parts = split_on_spaces(line.substr(first));
  if (parts.size() < 3) {
    return parse_error(fmt::format("expected 'PCR template-hash template-name field…', got {} column{}",
                                   parts.size(), parts.size() == 1 ? "" : "s"));
  }
  Entry entry;
  TPMSEC_ASSIGN_OR_RETURN(entry.pcr, parse_pcr(parts[0]));

  Result<Bytes> hash = from_hex(parts[1]);
  if (!hash.ok() || parts[1].size() != 2 * kTemplateHashSize) {
    return parse_error(fmt::format("template hash '{}' is not {} hex digits", printable(parts[1]),
                                   2 * kTemplateHashSize));
  }
  entry.template_hash = std::move(*hash);

  const TemplateLayout* layout = internal::find_template(parts[2]);
  if (layout == nullptr) {
    return parse_error(fmt::format("template '{}' is not supported ({})", printable(parts[2]),
                                   internal::supported_templates()));
  }
  entry.template_name = std::string(layout->name);
  size_t fields = parts.size() - 3;
  if (fields != layout->fields.size()) {
    return parse_error(fmt::format("template '{}' expects {} fields, got {}", layout->name, layout->fields.size(),
                                   fields));
  }
  for (size_t i = 0; i < fields; ++i) {
    TPMSEC_RETURN_IF_ERROR(internal::decode_ascii_field(layout->fields[i], parts[3 + i], entry));
  }
  TPMSEC_RETURN_IF_ERROR(internal::finish_entry(*layout, entry));
  return entry;
}

}  // namespace

ParsedLog parse_ascii_log(std::string_view text) {
  ParsedLog log;
  log.format = LogFormat::kAscii;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    // A log copied through another system may end its lines with CRLF.
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_number;
    if (!line.empty()) {
      Result<Entry> entry = parse_line(line);
      if (entry.ok()) {
        entry->line = line_number;
        entry->offset = start;
        log.entries.push_back(std::move(*entry));
      } else {
        log.problems.push_back(Problem{log.entries.size(), line_number, start,
                                       entry.error().with_context(fmt::format("line {}", line_number))});
      }
    }
    start = end + 1;
  }
  return log;
}

}  // namespace tpmsec::ima
