// Field layouts of the IMA templates and the kernel's template-data layout
// (security/integrity/ima: ima_template.c, ima_template_lib.c, ima_crypto.c).
#include "replay/ima_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "replay/little_endian.h"
#include "replay/printable.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"

namespace tpmsec::ima::internal {

namespace {

using replay_internal::append_le32;
using replay_internal::printable;

constexpr std::array kImaFields{Field::kDigest, Field::kEventName};
constexpr std::array kImaNgFields{Field::kDigestNg, Field::kEventNameNg};
constexpr std::array kImaSigFields{Field::kDigestNg, Field::kEventNameNg, Field::kSignature};
constexpr std::array kImaBufFields{Field::kDigestNg, Field::kEventNameNg, Field::kBuffer};
constexpr std::array kImaNgV2Fields{Field::kDigestNgV2, Field::kEventNameNg};
constexpr std::array kImaSigV2Fields{Field::kDigestNgV2, Field::kEventNameNg, Field::kSignature};
constexpr std::array kImaModsigFields{Field::kDigestNg, Field::kEventNameNg, Field::kSignature, Field::kDigestModsig,
                                      Field::kModsig};
constexpr std::array kEvmSigFields{Field::kDigestNg,   Field::kEventNameNg,  Field::kEvmSignature,
                                   Field::kXattrNames, Field::kXattrLengths, Field::kXattrValues,
                                   Field::kInodeUid,   Field::kInodeGid,     Field::kInodeMode};

// The kernel's built-in templates (security/integrity/ima/ima_template.c,
// builtin_templates[]).
const std::array<TemplateLayout, 8> kTemplates{{
    {"ima", kImaFields},
    {"ima-ng", kImaNgFields},
    {"ima-ngv2", kImaNgV2Fields},
    {"ima-sig", kImaSigFields},
    {"ima-sigv2", kImaSigV2Fields},
    {"ima-buf", kImaBufFields},
    {"ima-modsig", kImaModsigFields},
    {"evm-sig", kEvmSigFields},
}};

// Byte widths of the unsigned fields: the kernel writes iuid and igid from an
// unsigned int, imode from a u16, little-endian on the hosts that log them
// (or always, with ima_canonical_fmt).
size_t uint_width(Field field) { return field == Field::kInodeMode ? 2 : 4; }

void set_other_field(Field field, Bytes data, Entry& entry) {
  entry.other_fields.emplace_back(std::string(field_id(field)), std::move(data));
}

// The "ima" template's d field: a SHA-1 digest, not length-prefixed anywhere.
constexpr size_t kImaDigestSize = 20;
// Longest hash algorithm name accepted in d-ng ("streebog512" is 11).
constexpr size_t kMaxAlgorithmNameLength = 32;

bool is_algorithm_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxAlgorithmNameLength) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; });
}

// Hex as the kernel prints it: digits only, no prefix, even length.
Result<Bytes> field_hex(std::string_view text, std::string_view field) {
  if (text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    return parse_error(fmt::format("{} field is not hex: '{}'", field, printable(text)));
  }
  Result<Bytes> bytes = from_hex(text);
  if (!bytes.ok()) return parse_error(fmt::format("{} field is not hex: {}", field, bytes.error().message()));
  return bytes;
}

Status check_digest_size(size_t size, std::string_view field) {
  if (size == 0 || size > kMaxFileDigestSize) {
    return parse_error(fmt::format("{} digest is {} bytes, expected 1 to {}", field, size, kMaxFileDigestSize));
  }
  return ok_status();
}

Status check_event_name(std::string_view name, Field field) {
  if (name.find('\0') != std::string_view::npos) {
    return parse_error(fmt::format("{} field holds a NUL byte", field_id(field)));
  }
  if (field == Field::kEventName && name.size() > kEventNameLenMax) {
    return parse_error(
        fmt::format("n field is {} bytes, at most {} for the 'ima' template", name.size(), kEventNameLenMax));
  }
  return ok_status();
}

// A field's data as the kernel keeps it (ima_write_template_field_data).
Bytes field_data(Field field, const Entry& entry) {
  switch (field) {
    case Field::kDigest:
      return entry.file_digest;
    case Field::kDigestNg:  // "algo" ':' NUL digest
      return concat({as_bytes(entry.file_digest_algorithm), as_bytes(std::string_view(":\0", 2)), entry.file_digest});
    case Field::kEventName:
    case Field::kEventNameNg:  // the name and its NUL
      return concat({as_bytes(entry.event_name), as_bytes(std::string_view("\0", 1))});
    case Field::kDigestNgV2:  // "type:algo" ':' NUL digest
      return concat({as_bytes(entry.file_digest_type), as_bytes(std::string_view(":")),
                     as_bytes(entry.file_digest_algorithm), as_bytes(std::string_view(":\0", 2)), entry.file_digest});
    case Field::kSignature:
      return entry.signature;
    case Field::kBuffer:
      return entry.buffer;
    default:
      for (const auto& [id, data] : entry.other_fields) {
        if (id == field_id(field)) return data;
      }
      return {};
  }
}

// "ima" or "verity": the digest types d-ngv2 carries.
bool is_digest_type(std::string_view type) { return type == "ima" || type == "verity"; }

// d-modsig's data: empty, or "algo" ':' NUL digest as d-ng.
Result<Bytes> digest_with_algorithm(std::string_view algorithm, ByteView digest, std::string_view field) {
  if (!is_algorithm_name(algorithm)) {
    return parse_error(fmt::format("{} field has a bad algorithm name '{}'", field, printable(algorithm)));
  }
  TPMSEC_RETURN_IF_ERROR(check_digest_size(digest.size(), field));
  return concat({as_bytes(algorithm), as_bytes(std::string_view(":\0", 2)), digest});
}

}  // namespace

const TemplateLayout* find_template(std::string_view name) {
  for (const TemplateLayout& t : kTemplates) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string_view supported_templates() {
  return "ima, ima-ng, ima-ngv2, ima-sig, ima-sigv2, ima-buf, ima-modsig, evm-sig";
}

std::string_view field_id(Field field) {
  switch (field) {
    case Field::kDigest:
      return "d";
    case Field::kEventName:
      return "n";
    case Field::kDigestNg:
      return "d-ng";
    case Field::kEventNameNg:
      return "n-ng";
    case Field::kSignature:
      return "sig";
    case Field::kBuffer:
      return "buf";
    case Field::kDigestNgV2:
      return "d-ngv2";
    case Field::kDigestModsig:
      return "d-modsig";
    case Field::kModsig:
      return "modsig";
    case Field::kEvmSignature:
      return "evmsig";
    case Field::kXattrNames:
      return "xattrnames";
    case Field::kXattrLengths:
      return "xattrlengths";
    case Field::kXattrValues:
      return "xattrvalues";
    case Field::kInodeUid:
      return "iuid";
    case Field::kInodeGid:
      return "igid";
    case Field::kInodeMode:
      return "imode";
  }
  return "?";
}

// d-ng: "ALGORITHM:HEX".
Status ascii_digest_ng(std::string_view text, Entry& entry) {
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return parse_error(fmt::format("d-ng field '{}' is not ALGORITHM:HEX", printable(text)));
  }
  std::string_view algorithm = text.substr(0, colon);
  if (!is_algorithm_name(algorithm)) {
    return parse_error(fmt::format("d-ng field has a bad algorithm name '{}'", printable(algorithm)));
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes digest, field_hex(text.substr(colon + 1), "d-ng"));
  TPMSEC_RETURN_IF_ERROR(check_digest_size(digest.size(), "d-ng"));
  entry.file_digest_algorithm = std::string(algorithm);
  entry.file_digest = std::move(digest);
  return ok_status();
}

// d-ngv2: "ima:sha256:HEX" (the kernel prints up to the last ':', then hex).
Status ascii_digest_ngv2(std::string_view text, Entry& entry) {
  size_t first = text.find(':');
  size_t last = text.rfind(':');
  if (first == std::string_view::npos || first == last) {
    return parse_error(fmt::format("d-ngv2 field '{}' is not TYPE:ALGORITHM:HEX", printable(text)));
  }
  std::string_view type = text.substr(0, first), algorithm = text.substr(first + 1, last - first - 1);
  if (!is_digest_type(type)) {
    return parse_error(fmt::format("d-ngv2 field has an unknown digest type '{}'", printable(type)));
  }
  if (!is_algorithm_name(algorithm)) {
    return parse_error(fmt::format("d-ngv2 field has a bad algorithm name '{}'", printable(algorithm)));
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes digest, field_hex(text.substr(last + 1), "d-ngv2"));
  TPMSEC_RETURN_IF_ERROR(check_digest_size(digest.size(), "d-ngv2"));
  entry.file_digest_type = std::string(type);
  entry.file_digest_algorithm = std::string(algorithm);
  entry.file_digest = std::move(digest);
  return ok_status();
}

// d-modsig: empty, or "ALGORITHM:HEX".
Status ascii_digest_modsig(std::string_view text, Entry& entry) {
  const Field field = Field::kDigestModsig;
  if (text.empty()) {
    set_other_field(field, {}, entry);
    return ok_status();
  }
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return parse_error(fmt::format("d-modsig field '{}' is not ALGORITHM:HEX", printable(text)));
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes digest, field_hex(text.substr(colon + 1), "d-modsig"));
  TPMSEC_ASSIGN_OR_RETURN(Bytes data, digest_with_algorithm(text.substr(0, colon), digest, "d-modsig"));
  set_other_field(field, std::move(data), entry);
  return ok_status();
}

// iuid, igid, imode: empty, or a decimal number of the field's width.
Status ascii_inode_number(Field field, std::string_view text, Entry& entry) {
  if (text.empty()) {
    set_other_field(field, {}, entry);
    return ok_status();
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const size_t width = uint_width(field);
  if (ec != std::errc() || end != text.data() + text.size() || (width < 8 && value >> (8 * width))) {
    return parse_error(
        fmt::format("{} field '{}' is not a {}-bit unsigned number", field_id(field), printable(text), 8 * width));
  }
  Bytes data(width);
  for (size_t i = 0; i < width; ++i) data[i] = static_cast<uint8_t>(value >> (8 * i));
  set_other_field(field, std::move(data), entry);
  return ok_status();
}

Status decode_ascii_field(Field field, std::string_view text, Entry& entry) {
  switch (field) {
    case Field::kDigest: {
      TPMSEC_ASSIGN_OR_RETURN(Bytes digest, field_hex(text, "d"));
      if (digest.size() != kImaDigestSize) {
        return parse_error(fmt::format("d field is {} bytes, expected {}", digest.size(), kImaDigestSize));
      }
      entry.file_digest = std::move(digest);
      return ok_status();
    }
    case Field::kDigestNg:
      return ascii_digest_ng(text, entry);
    case Field::kEventName:
    case Field::kEventNameNg:
      TPMSEC_RETURN_IF_ERROR(check_event_name(text, field));
      entry.event_name = std::string(text);
      return ok_status();
    case Field::kSignature: {
      TPMSEC_ASSIGN_OR_RETURN(entry.signature, field_hex(text, "sig"));
      return ok_status();
    }
    case Field::kBuffer: {
      TPMSEC_ASSIGN_OR_RETURN(entry.buffer, field_hex(text, "buf"));
      return ok_status();
    }
    case Field::kDigestNgV2:
      return ascii_digest_ngv2(text, entry);
    case Field::kDigestModsig:
      return ascii_digest_modsig(text, entry);
    case Field::kModsig:
    case Field::kEvmSignature:
    case Field::kXattrLengths:
    case Field::kXattrValues: {
      TPMSEC_ASSIGN_OR_RETURN(Bytes data, field_hex(text, field_id(field)));
      set_other_field(field, std::move(data), entry);
      return ok_status();
    }
    case Field::kXattrNames:
      // Shown as the text it holds (names joined by '|'), kept without a NUL.
      if (text.find('\0') != std::string_view::npos) return parse_error("xattrnames field holds a NUL byte");
      set_other_field(field, Bytes(text.begin(), text.end()), entry);
      return ok_status();
    case Field::kInodeUid:
    case Field::kInodeGid:
    case Field::kInodeMode:
      return ascii_inode_number(field, text, entry);
  }
  return parse_error("unknown field");
}

// d-ng: "algo" ':' NUL digest; the digest may itself hold ':' or NUL bytes.
Status binary_digest_ng(ByteView data, Entry& entry) {
  std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon + 1 >= text.size() || text[colon + 1] != '\0') {
    return parse_error("d-ng field is not ALGORITHM ':' NUL DIGEST");
  }
  std::string_view algorithm = text.substr(0, colon);
  if (!is_algorithm_name(algorithm)) {
    return parse_error(fmt::format("d-ng field has a bad algorithm name '{}'", printable(algorithm)));
  }
  ByteView digest = data.subspan(colon + 2);
  TPMSEC_RETURN_IF_ERROR(check_digest_size(digest.size(), "d-ng"));
  entry.file_digest_algorithm = std::string(algorithm);
  entry.file_digest.assign(digest.begin(), digest.end());
  return ok_status();
}

// d-ngv2: "type:algo" ':' NUL digest.
Status binary_digest_ngv2(ByteView data, Entry& entry) {
  std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  size_t nul = text.find('\0');
  if (nul == std::string_view::npos || nul < 2 || text[nul - 1] != ':') {
    return parse_error("d-ngv2 field is not TYPE ':' ALGORITHM ':' NUL DIGEST");
  }
  std::string_view head = text.substr(0, nul - 1);
  size_t colon = head.find(':');
  if (colon == std::string_view::npos) return parse_error("d-ngv2 field has no digest type");
  std::string_view type = head.substr(0, colon), algorithm = head.substr(colon + 1);
  if (!is_digest_type(type)) {
    return parse_error(fmt::format("d-ngv2 field has an unknown digest type '{}'", printable(type)));
  }
  if (!is_algorithm_name(algorithm)) {
    return parse_error(fmt::format("d-ngv2 field has a bad algorithm name '{}'", printable(algorithm)));
  }
  ByteView digest = data.subspan(nul + 1);
  TPMSEC_RETURN_IF_ERROR(check_digest_size(digest.size(), "d-ngv2"));
  entry.file_digest_type = std::string(type);
  entry.file_digest_algorithm = std::string(algorithm);
  entry.file_digest.assign(digest.begin(), digest.end());
  return ok_status();
}

Status decode_binary_field(Field field, ByteView data, Entry& entry) {
  std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  switch (field) {
    case Field::kDigest:
      if (data.size() != kImaDigestSize) {
        return parse_error(fmt::format("d field is {} bytes, expected {}", data.size(), kImaDigestSize));
      }
      entry.file_digest.assign(data.begin(), data.end());
      return ok_status();
    case Field::kDigestNg:
      return binary_digest_ng(data, entry);
    case Field::kEventName:  // shown without its NUL (IMA_SHOW_BINARY_OLD_STRING_FMT)
      TPMSEC_RETURN_IF_ERROR(check_event_name(text, field));
      entry.event_name = std::string(text);
      return ok_status();
    case Field::kEventNameNg:
      if (text.empty() || text.back() != '\0') return parse_error("n-ng field does not end with NUL");
      text.remove_suffix(1);
      TPMSEC_RETURN_IF_ERROR(check_event_name(text, field));
      entry.event_name = std::string(text);
      return ok_status();
    case Field::kSignature:
      entry.signature.assign(data.begin(), data.end());
      return ok_status();
    case Field::kBuffer:
      entry.buffer.assign(data.begin(), data.end());
      return ok_status();
    case Field::kDigestNgV2:
      return binary_digest_ngv2(data, entry);
    case Field::kDigestModsig: {
      if (!data.empty()) {
        size_t colon = text.find(':');
        if (colon == std::string_view::npos || colon + 1 >= text.size() || text[colon + 1] != '\0') {
          return parse_error("d-modsig field is not ALGORITHM ':' NUL DIGEST");
        }
        TPMSEC_RETURN_IF_ERROR(
            status_of(digest_with_algorithm(text.substr(0, colon), data.subspan(colon + 2), "d-modsig")));
      }
      set_other_field(field, Bytes(data.begin(), data.end()), entry);
      return ok_status();
    }
    case Field::kInodeUid:
    case Field::kInodeGid:
    case Field::kInodeMode:
      if (!data.empty() && data.size() != uint_width(field)) {
        return parse_error(
            fmt::format("{} field is {} bytes, expected {}", field_id(field), data.size(), uint_width(field)));
      }
      set_other_field(field, Bytes(data.begin(), data.end()), entry);
      return ok_status();
    case Field::kModsig:
    case Field::kEvmSignature:
    case Field::kXattrNames:
    case Field::kXattrLengths:
    case Field::kXattrValues:
      set_other_field(field, Bytes(data.begin(), data.end()), entry);
      return ok_status();
  }
  return parse_error("unknown field");
}

std::optional<uint16_t> bank_of_hash_size(size_t size) {
  for (uint16_t bank : {alg::kSha1, alg::kSha256, alg::kSha384, alg::kSha512}) {
    if (digest_size(bank) == size) return bank;
  }
  return std::nullopt;
}

Status finish_entry(const TemplateLayout& layout, uint16_t hash_bank, Entry& entry) {
  Bytes data;
  if (layout.name == "ima") {
    // Not length-prefixed; the name is zero-padded to IMA_EVENT_NAME_LEN_MAX + 1.
    data = concat({entry.file_digest, as_bytes(entry.event_name)});
    data.resize(kImaDigestSize + kEventNameLenMax + 1, 0);
  } else {
    for (Field field : layout.fields) {
      Bytes f = field_data(field, entry);
      if (f.size() > kMaxTemplateDataSize) break;  // refused just below
      append_le32(data, static_cast<uint32_t>(f.size()));
      data.insert(data.end(), f.begin(), f.end());
    }
  }
  if (data.size() > kMaxTemplateDataSize) {
    return parse_error(fmt::format("template data is over {} bytes", kMaxTemplateDataSize));
  }
  entry.template_data = std::move(data);

  entry.violation =
      std::all_of(entry.template_hash.begin(), entry.template_hash.end(), [](uint8_t b) { return b == 0; });
  if (entry.violation) return ok_status();
  TPMSEC_ASSIGN_OR_RETURN(Bytes computed, crypto::hash(hash_bank, {entry.template_data}));
  if (computed != entry.template_hash) {
    return integrity_error(fmt::format("template hash {} does not match the template data ({} {})",
                                       to_hex(entry.template_hash), hash_name(hash_bank), to_hex(computed)));
  }
  return ok_status();
}

}  // namespace tpmsec::ima::internal
