// Field layouts of the IMA templates and the kernel's template-data layout
// (security/integrity/ima: ima_template.c, ima_template_lib.c, ima_crypto.c).
#include "replay/ima_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

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

const std::array<TemplateLayout, 4> kTemplates{{
    {"ima", kImaFields},
    {"ima-ng", kImaNgFields},
    {"ima-sig", kImaSigFields},
    {"ima-buf", kImaBufFields},
}};

// The "ima" template's d field: a SHA-1 digest, not length-prefixed anywhere.
constexpr size_t kImaDigestSize = 20;
// Longest hash algorithm name accepted in d-ng ("streebog512" is 11).
constexpr size_t kMaxAlgorithmNameLength = 32;

bool is_algorithm_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxAlgorithmNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
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
    return parse_error(fmt::format("n field is {} bytes, at most {} for the 'ima' template", name.size(),
                                   kEventNameLenMax));
  }
  return ok_status();
}

// A field's data as the kernel keeps it (ima_write_template_field_data).
Bytes field_data(Field field, const Entry& entry) {
  switch (field) {
    case Field::kDigest:
      return entry.file_digest;
    case Field::kDigestNg:  // "algo" ':' NUL digest
      return concat({as_bytes(entry.file_digest_algorithm), as_bytes(std::string_view(":\0", 2)),
                     entry.file_digest});
    case Field::kEventName:
    case Field::kEventNameNg:  // the name and its NUL
      return concat({as_bytes(entry.event_name), as_bytes(std::string_view("\0", 1))});
    case Field::kSignature:
      return entry.signature;
    case Field::kBuffer:
      return entry.buffer;
  }
  return {};
}

}  // namespace

const TemplateLayout* find_template(std::string_view name) {
  for (const TemplateLayout& t : kTemplates) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string_view supported_templates() { return "ima, ima-ng, ima-sig, ima-buf"; }

std::string_view field_id(Field field) {
  switch (field) {
    case Field::kDigest: return "d";
    case Field::kEventName: return "n";
    case Field::kDigestNg: return "d-ng";
    case Field::kEventNameNg: return "n-ng";
    case Field::kSignature: return "sig";
    case Field::kBuffer: return "buf";
  }
  return "?";
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
    case Field::kDigestNg: {
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
  }
  return parse_error("unknown field");
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
    case Field::kDigestNg: {
      // "algo" ':' NUL digest; the digest may itself hold ':' or NUL bytes.
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
  }
  return parse_error("unknown field");
}

Status finish_entry(const TemplateLayout& layout, Entry& entry) {
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

  entry.violation = std::all_of(entry.template_hash.begin(), entry.template_hash.end(), [](uint8_t b) { return b == 0; });
  if (entry.violation) return ok_status();
  TPMSEC_ASSIGN_OR_RETURN(Bytes sha1, crypto::hash(alg::kSha1, {entry.template_data}));
  if (sha1 != entry.template_hash) {
    return integrity_error(fmt::format("template hash {} does not match the template data (SHA-1 {})",
                                       to_hex(entry.template_hash), to_hex(sha1)));
  }
  return ok_status();
}

}  // namespace tpmsec::ima::internal
