// The pins' files (file_host_state.h): --tofu's null-key pins and --ek-ca's
// EK pins.
#include <fmt/format.h>

#include "state_file.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/text.h"

namespace tpmsec {

using state_file::salt_label;

Result<std::optional<NullKeyPin>> FileHostState::null_key_pin(const TpmId& tpm, SaltKind kind) const {
  const std::string file = where(StateRecord::kNullKeyPin, tpm, kind);
  const char* salt = salt_label(kind);
  TPMSEC_ASSIGN_OR_RETURN(auto read, state_file::read_fields(at(StateRecord::kNullKeyPin, tpm, kind)));
  if (!read) return std::optional<NullKeyPin>();
  auto& fields = *read;
  const std::string &stored_tpm = fields["tpm"], &stored_salt = fields["salt"], &boot = fields["boot"],
                    &name_hex = fields["name"];
  auto name = from_hex(name_hex);
  if (stored_tpm != tpm.text || stored_salt != salt || boot.empty() || !name.ok() || name->size() < 2) {
    return parse_error(
        fmt::format("{}: not a tpmsec pin file for {} ({} salt); remove it with "
                    "'tpmsec null-key --forget --tpm {}'",
                    file, tpm.text, salt, tpm.text));
  }
  return std::optional<NullKeyPin>(NullKeyPin{std::move(*name), boot});
}

Status FileHostState::put_null_key_pin(const TpmId& tpm, SaltKind kind, const NullKeyPin& pin) {
  if (tpm.text.find('\n') != std::string::npos || pin.boot_id.find('\n') != std::string::npos) {
    return usage_error("a TPM string or boot id with a newline cannot be pinned");
  }
  std::string text =
      fmt::format("tpm={}\nsalt={}\nboot={}\nname={}\n", tpm.text, salt_label(kind), pin.boot_id, to_hex(pin.name));
  return files::write_private(at(StateRecord::kNullKeyPin, tpm, kind), text);
}

Result<std::optional<EkPinRecord>> FileHostState::ek_pin(const TpmId& tpm, SaltKind kind) const {
  const std::string file = where(StateRecord::kEkPin, tpm, kind);
  TPMSEC_ASSIGN_OR_RETURN(auto read, state_file::read_fields(at(StateRecord::kEkPin, tpm, kind)));
  if (!read) return std::optional<EkPinRecord>();
  auto& fields = *read;
  auto name = from_hex(fields["name"]);
  auto null_name = from_hex(fields["null_name"]);
  if (fields["tpm"] != tpm.text || fields["salt"] != salt_label(kind) || !name.ok() || name->size() < 2 ||
      !null_name.ok() || fields["null_boot"].empty() != null_name->empty()) {
    return parse_error(
        fmt::format("{}: not a tpmsec EK pin file for {} ({} EK); remove it with "
                    "'tpmsec null-key --forget --tpm {}'",
                    file, tpm.text, salt_label(kind), tpm.text));
  }
  return std::optional<EkPinRecord>(EkPinRecord{std::move(*name), fields["null_boot"], std::move(*null_name)});
}

Status FileHostState::put_ek_pin(const TpmId& tpm, SaltKind kind, const EkPinRecord& record) {
  if (tpm.text.find('\n') != std::string::npos || record.null_boot.find('\n') != std::string::npos) {
    return usage_error("a TPM string or boot id with a newline cannot be pinned");
  }
  std::string text = fmt::format("tpm={}\nsalt={}\nname={}\nnull_boot={}\nnull_name={}\n", tpm.text, salt_label(kind),
                                 to_hex(record.name), record.null_boot, to_hex(record.null_name));
  return files::write_private(at(StateRecord::kEkPin, tpm, kind), text);
}

}  // namespace tpmsec
