// What `tpmsec provision` keeps (file_host_state.h): the bind secret and the
// pinned salt key, one file per TPM string.
#include <fmt/format.h>

#include <map>

#include "state_file.h"
#include "tpmsec/constants.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

// A provisioning record that does not read back: named, with how to remove it.
Error not_provisioned(const std::string& file, const char* what, const TpmId& tpm, const char* remove_options) {
  return parse_error(fmt::format("{}: not a tpmsec {} for {}; 'tpmsec provision --remove{} --tpm {}' removes it", file,
                                 what, tpm.text, remove_options, tpm.text));
}

// A record is lines: the TPM string must be one.
Status check_one_line(const TpmId& tpm) {
  if (tpm.text.find('\n') != std::string::npos) return usage_error("a TPM string with a newline cannot be provisioned");
  return ok_status();
}

using Fields = std::map<std::string, std::string>;

// The record in `file`, made by `parse` from its lines; none when none is kept.
template <typename T, typename Parse>
Result<std::optional<T>> read_provisioned(const files::StatePath& file, Parse parse) {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fields> fields, state_file::read_fields(file));
  if (!fields) return std::optional<T>();
  TPMSEC_ASSIGN_OR_RETURN(T value, parse(*fields));
  return std::optional<T>(std::move(value));
}

Result<BindSecret> bind_secret_of(Fields& f, const std::string& file, const TpmId& tpm) {
  auto bad = [&] { return not_provisioned(file, "bind secret", tpm, ""); };
  if (f["tpm"] != tpm.text) return bad();
  const std::optional<uint32_t> index = state_file::handle_value(f["index"]);
  auto secret = from_hex(f["secret"]);
  if (!index || !secret.ok() || secret->size() != kBindSecretBytes) return bad();
  BindSecret b;
  b.nv_index = *index;
  TPMSEC_ASSIGN_OR_RETURN(b.name, nv_index_name(bind_index_public(b.nv_index)));
  b.secret = SecretBytes(*secret);
  secure_wipe(secret->data(), secret->size());
  secure_wipe(f["secret"].data(), f["secret"].size());
  return b;
}

Result<PersistentSaltKey> salt_key_of(Fields& f, const std::string& file, const TpmId& tpm) {
  auto bad = [&] { return not_provisioned(file, "salt key", tpm, " --salt-key"); };
  if (f["tpm"] != tpm.text || (f["created"] != "0" && f["created"] != "1")) return bad();
  PersistentSaltKey k;
  k.handle = state_file::handle_value(f["handle"]).value_or(0);
  auto pub_bytes = from_hex(f["public"]);
  if ((k.handle >> 24) != ht::kPersistent || !pub_bytes.ok()) return bad();
  auto pub = unmarshal_exact<Public>(*pub_bytes, "kept salt key");
  // A kept key is held to what a salt key must be, as when it was pinned.
  if (!pub.ok() || !check_salt_key_public(*pub).ok()) return bad();
  k.public_area = std::move(*pub);
  TPMSEC_ASSIGN_OR_RETURN(k.name, compute_name(k.public_area));
  k.created = f["created"] == "1";
  return k;
}

}  // namespace

Result<std::optional<BindSecret>> FileHostState::bind_secret(const TpmId& tpm) const {
  const std::string file = where(StateRecord::kBindSecret, tpm);
  return read_provisioned<BindSecret>(at(StateRecord::kBindSecret, tpm),
                                      [&](Fields& f) { return bind_secret_of(f, file, tpm); });
}

Status FileHostState::put_bind_secret(const TpmId& tpm, const BindSecret& b) {
  TPMSEC_RETURN_IF_ERROR(check_one_line(tpm));
  std::string text = fmt::format("tpm={}\nindex=0x{:08x}\nsecret={}\n", tpm.text, b.nv_index, to_hex(b.secret.view()));
  Status st = files::write_private(at(StateRecord::kBindSecret, tpm), text);
  secure_wipe(text.data(), text.size());
  return st;
}

Result<std::optional<PersistentSaltKey>> FileHostState::salt_key(const TpmId& tpm) const {
  const std::string file = where(StateRecord::kSaltKey, tpm);
  return read_provisioned<PersistentSaltKey>(at(StateRecord::kSaltKey, tpm),
                                             [&](Fields& f) { return salt_key_of(f, file, tpm); });
}

Status FileHostState::put_salt_key(const TpmId& tpm, const PersistentSaltKey& k) {
  TPMSEC_RETURN_IF_ERROR(check_one_line(tpm));
  TPMSEC_ASSIGN_OR_RETURN(Bytes pub, marshal_to_bytes(k.public_area));
  return files::write_private(at(StateRecord::kSaltKey, tpm),
                              fmt::format("tpm={}\nhandle=0x{:08x}\nname={}\npublic={}\ncreated={}\n", tpm.text,
                                          k.handle, to_hex(k.name), to_hex(pub), k.created ? 1 : 0));
}

}  // namespace tpmsec
