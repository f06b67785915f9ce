// The IMA templates tpmsec reads: their field layouts, decoding each field from
// either log rendering, and rebuilding the template data the kernel hashed.
// Internal to src/replay; the public API is tpmsec/replay/ima_log.h.
#ifndef TPMSEC_SRC_REPLAY_IMA_TEMPLATE_H_
#define TPMSEC_SRC_REPLAY_IMA_TEMPLATE_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tpmsec/replay/ima_log.h"

namespace tpmsec::ima::internal {

// Template fields (the kernel's ima_template_lib.c field ids).
enum class Field {
  kDigest,        // d
  kEventName,     // n
  kDigestNg,      // d-ng
  kDigestNgV2,    // d-ngv2: digest type ("ima", "verity") and algorithm
  kEventNameNg,   // n-ng
  kSignature,     // sig
  kBuffer,        // buf
  kDigestModsig,  // d-modsig: the digest an appended signature covers (may be empty)
  kModsig,        // modsig: the appended signature (may be empty)
  kEvmSignature,  // evmsig: an EVM portable signature (may be empty)
  kXattrNames,    // xattrnames: '|'-separated names (may be empty)
  kXattrLengths,  // xattrlengths (may be empty)
  kXattrValues,   // xattrvalues (may be empty)
  kInodeUid,      // iuid: u32 (may be empty)
  kInodeGid,      // igid: u32 (may be empty)
  kInodeMode,     // imode: u16 (may be empty)
};

struct TemplateLayout {
  std::string_view name;
  std::span<const Field> fields;
};

// The layout of a supported template, or nullptr.
const TemplateLayout* find_template(std::string_view name);
// The supported templates' names, for error messages.
std::string_view supported_templates();
// "d-ng" etc.
std::string_view field_id(Field field);

// Decodes one field as ascii_runtime_measurements shows it into `entry`.
Status decode_ascii_field(Field field, std::string_view text, Entry& entry);

// Decodes one field's data as binary_runtime_measurements holds it (for
// non-"ima" templates without the u32 length; for the "ima" template's n
// field, the name without NUL).
Status decode_binary_field(Field field, ByteView data, Entry& entry);

// Rebuilds entry.template_data from the decoded fields in the kernel's layout
// (ima_calc_field_array_hash_tfm), bounds it, and checks the template hash
// against its hash in `hash_bank` (setting entry.violation when it is all
// zero). kIntegrity on a mismatch.
Status finish_entry(const TemplateLayout& layout, uint16_t hash_bank, Entry& entry);

// The bank a template-hash column of `size` bytes is taken for when the list
// does not name it: sha1, sha256, sha384, sha512; nullopt for other sizes.
std::optional<uint16_t> bank_of_hash_size(size_t size);
// The template-hash sizes bank_of_hash_size knows, smallest first.
inline constexpr size_t kHashSizes[] = {20, 32, 48, 64};

}  // namespace tpmsec::ima::internal

#endif  // TPMSEC_SRC_REPLAY_IMA_TEMPLATE_H_
