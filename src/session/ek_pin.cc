#include "tpmsec/ek_pin.h"

#include <fmt/format.h>

#include "state_file.h"

namespace tpmsec {
namespace {

const char* label(SaltKind kind) { return kind == SaltKind::kRsa ? "rsa" : "ecc"; }

}  // namespace

EkPinStore::EkPinStore(std::string state_dir) : dir_(std::move(state_dir) + "/ek-pins") {}

std::string EkPinStore::path(const std::string& tpm, SaltKind kind) const {
  return fmt::format("{}/{}-{}", dir_, state_file::tpm_id(tpm), label(kind));
}

Result<std::optional<EkPinStore::Record>> EkPinStore::get(const std::string& tpm, SaltKind kind) const {
  std::string file = path(tpm, kind);
  bool missing = false;
  TPMSEC_ASSIGN_OR_RETURN(std::string text, state_file::read(file, &missing));
  if (missing) return std::optional<Record>();
  auto fields = state_file::parse_lines(text);
  auto name = from_hex(fields["name"]);
  auto null_name = from_hex(fields["null_name"]);
  if (fields["tpm"] != tpm || fields["salt"] != label(kind) || !name.ok() || name->size() < 2 || !null_name.ok() ||
      fields["null_boot"].empty() != null_name->empty()) {
    return parse_error(fmt::format("{}: not a tpmsec EK pin file for {} ({} EK); remove it with "
                                   "'tpmsec null-key --forget --tpm {}'",
                                   file, tpm, label(kind), tpm));
  }
  return std::optional<Record>(Record{std::move(*name), fields["null_boot"], std::move(*null_name)});
}

Status EkPinStore::put(const std::string& tpm, SaltKind kind, const Record& record) {
  if (tpm.find('\n') != std::string::npos || record.null_boot.find('\n') != std::string::npos) {
    return usage_error("a TPM string or boot id with a newline cannot be pinned");
  }
  std::string text = fmt::format("tpm={}\nsalt={}\nname={}\nnull_boot={}\nnull_name={}\n", tpm, label(kind),
                                 to_hex(record.name), record.null_boot, to_hex(record.null_name));
  return state_file::write_private(dir_, path(tpm, kind), text);
}

Result<bool> EkPinStore::forget(const std::string& tpm) {
  bool any = false;
  for (SaltKind kind : {SaltKind::kEcc, SaltKind::kRsa}) {
    TPMSEC_ASSIGN_OR_RETURN(bool removed, state_file::remove(path(tpm, kind)));
    any = any || removed;
  }
  return any;
}

}  // namespace tpmsec
