// binary_runtime_measurements, as the kernel's ima_measurements_show writes
// each entry (native byte order, read here as little-endian):
//   u32 PCR, the template hash (20-byte SHA-1 in the classic list, the bank's
//   digest in a per-bank list), u32 template-name length, the name;
//   for every template but "ima": u32 template-data length, then the template
//     data, each field a u32 length and its data;
//   for "ima": the 20-byte d field, then a u32 length and the name without NUL
//     (IMA_SHOW_BINARY_NO_FIELD_DATA_SIZE, IMA_SHOW_BINARY_OLD_STRING_FMT).
#include <fmt/format.h>

#include "replay/ima_template.h"
#include "replay/little_endian.h"
#include "replay/printable.h"
#include "tpmsec/constants.h"
#include "tpmsec/replay/ima_log.h"
#include "tpmsec/wire.h"

namespace tpmsec::ima {

namespace {

using internal::Field;
using internal::TemplateLayout;
using replay_internal::printable;
using replay_internal::read_le32;

constexpr size_t kImaDigestSize = 20;

// What the framing of one entry gave: enough to find the next entry.
struct RawEntry {
  uint32_t pcr = 0;
  ByteView template_hash;
  std::string_view template_name;
  ByteView template_data;   // non-"ima" templates
  ByteView ima_digest;      // "ima": d
  ByteView ima_name;        // "ima": n, without NUL
  bool bad_length = false;  // failed on an impossible length, not on the input ending
};

std::string_view as_text(ByteView b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

// Reads one entry's framing; on failure the reader says what and where.
RawEntry read_frame(Reader& r, size_t hash_size) {
  RawEntry raw;
  auto bad_length = [&](std::string message) {
    raw.bad_length = true;
    r.fail(std::move(message));
  };
  raw.pcr = read_le32(r, "PCR index");
  raw.template_hash = r.bytes(hash_size, "template hash");
  size_t at = r.offset();
  uint32_t name_length = read_le32(r, "template name length");
  if (r.ok() && (name_length == 0 || name_length > kMaxTemplateNameLength)) {
    bad_length(
        fmt::format("template name length {} at offset {} is not 1 to {}", name_length, at, kMaxTemplateNameLength));
  }
  raw.template_name = as_text(r.bytes(name_length, "template name"));
  if (!r.ok()) return raw;
  if (raw.template_name == "ima") {
    raw.ima_digest = r.bytes(kImaDigestSize, "d field");
    at = r.offset();
    uint32_t length = read_le32(r, "n field length");
    if (r.ok() && length > kEventNameLenMax) {
      bad_length(fmt::format("n field length {} at offset {} is above {}", length, at, kEventNameLenMax));
    }
    raw.ima_name = r.bytes(length, "n field");
  } else {
    at = r.offset();
    uint32_t length = read_le32(r, "template data length");
    if (r.ok() && length > kMaxTemplateDataSize) {
      bad_length(fmt::format("template data length {} at offset {} is above {}", length, at, kMaxTemplateDataSize));
    }
    raw.template_data = r.bytes(length, "template data");
  }
  return raw;
}

// Decodes a framed entry; its errors do not stop the parse.
Result<Entry> decode(const RawEntry& raw, uint16_t hash_bank) {
  if (raw.pcr > kMaxPcrIndex) return parse_error(fmt::format("PCR {} is above {}", raw.pcr, kMaxPcrIndex));
  const TemplateLayout* layout = internal::find_template(raw.template_name);
  if (layout == nullptr) {
    return parse_error(fmt::format("template '{}' is not supported ({})", printable(raw.template_name),
                                   internal::supported_templates()));
  }
  Entry entry;
  entry.pcr = raw.pcr;
  entry.template_name = std::string(layout->name);
  entry.template_hash.assign(raw.template_hash.begin(), raw.template_hash.end());

  if (layout->name == "ima") {
    TPMSEC_RETURN_IF_ERROR(internal::decode_binary_field(Field::kDigest, raw.ima_digest, entry));
    TPMSEC_RETURN_IF_ERROR(internal::decode_binary_field(Field::kEventName, raw.ima_name, entry));
    TPMSEC_RETURN_IF_ERROR(internal::finish_entry(*layout, hash_bank, entry));
    return entry;
  }

  Reader fields(raw.template_data);
  for (Field field : layout->fields) {
    uint32_t length = read_le32(fields, internal::field_id(field));
    ByteView data = fields.bytes(length, internal::field_id(field));
    if (!fields.ok()) break;
    TPMSEC_RETURN_IF_ERROR(internal::decode_binary_field(field, data, entry));
  }
  fields.expect_end("template data");
  if (!fields.ok()) {
    return parse_error(fmt::format("template '{}' data does not hold its {} fields: {}", layout->name,
                                   layout->fields.size(), fields.status().error().message()));
  }
  TPMSEC_RETURN_IF_ERROR(internal::finish_entry(*layout, hash_bank, entry));
  // Decoding is strict, so the rebuilt data is the logged data; say so if not.
  if (!std::equal(entry.template_data.begin(), entry.template_data.end(), raw.template_data.begin(),
                  raw.template_data.end())) {
    return parse_error("template data does not follow the kernel's layout");
  }
  return entry;
}

// The template-hash size after which the first entry's name is a supported
// template's: the list's bank when it is not named.
std::optional<uint16_t> guess_hash_bank(ByteView data) {
  for (size_t size : internal::kHashSizes) {
    Reader r(data);
    read_le32(r, "PCR index");
    r.bytes(size, "template hash");
    uint32_t name_length = read_le32(r, "template name length");
    if (!r.ok() || name_length == 0 || name_length > kMaxTemplateNameLength) continue;
    ByteView name = r.bytes(name_length, "template name");
    if (r.ok() && internal::find_template(as_text(name)) != nullptr) return internal::bank_of_hash_size(size);
  }
  return std::nullopt;
}

}  // namespace

ParsedLog parse_binary_log(ByteView data, std::optional<uint16_t> hash_bank) {
  ParsedLog log;
  log.format = LogFormat::kBinary;
  if (!hash_bank) hash_bank = guess_hash_bank(data);
  const uint16_t bank = hash_bank.value_or(alg::kSha1);  // the classic list when nothing fits
  log.hash_bank = bank;
  if (!digest_size(bank)) {
    log.problems.push_back(Problem{0, 0, 0, parse_error(fmt::format("template-hash bank 0x{:04x} is unknown", bank))});
    log.complete = false;
    return log;
  }
  Reader r(data);
  for (size_t index = 0; r.remaining() > 0; ++index) {
    size_t offset = r.offset();
    std::string where = fmt::format("entry {} at offset {}", index, offset);
    RawEntry raw = read_frame(r, *digest_size(bank));
    if (!r.ok()) {
      log.problems.push_back(Problem{log.entries.size(), 0, offset, r.status().error().with_context(where)});
      log.complete = false;
      // The input ended inside the entry: a partial tail, not a bad entry.
      if (!raw.bad_length) log.tail = Tail{offset, data.size() - offset};
      break;
    }
    Result<Entry> entry = decode(raw, bank);
    if (!entry.ok()) {
      log.problems.push_back(Problem{log.entries.size(), 0, offset, entry.error().with_context(where)});
      continue;
    }
    entry->offset = offset;
    log.entries.push_back(std::move(*entry));
  }
  return log;
}

}  // namespace tpmsec::ima
