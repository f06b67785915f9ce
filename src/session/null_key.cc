#include "tpmsec/null_key.h"

#include <fmt/format.h>

#include "tpmsec/crypto.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

constexpr uint32_t kNullKeyAttributes = object_attr::kFixedTpm | object_attr::kFixedParent |
                                        object_attr::kSensitiveDataOrigin | object_attr::kUserWithAuth |
                                        object_attr::kNoDa | object_attr::kRestricted | object_attr::kDecrypt;

}  // namespace

Public null_key_template(SaltKind kind) {
  Public p;
  p.name_alg = alg::kSha256;
  p.attributes = kNullKeyAttributes;  // 0x00030472
  p.symmetric = SymDef::aes128_cfb();
  if (kind == SaltKind::kEcc) {
    p.type = alg::kEcc;
    p.curve = curve::kNistP256;
  } else {
    p.type = alg::kRsa;
    p.key_bits = 2048;
    p.exponent = 0;
  }
  return p;
}

namespace {

// nameAlg || H_nameAlg(the marshalled public area).
template <class PublicArea>
Result<Bytes> name_of(const PublicArea& area) {
  TPMSEC_ASSIGN_OR_RETURN(Bytes marshalled, marshal_to_bytes(area));
  return compute_name(marshalled);
}

}  // namespace

Result<Bytes> compute_name(const Public& public_area) { return name_of(public_area); }
Result<Bytes> compute_name(const NvPublic& nv_public) { return name_of(nv_public); }

Result<Bytes> compute_name(ByteView marshalled_area) {
  // TPMT_PUBLIC: type, nameAlg; TPMS_NV_PUBLIC: nvIndex (4 bytes), nameAlg.
  // Both: nameAlg at the offset their first field ends.
  const bool nv = marshalled_area.size() >= 4 && marshalled_area[0] == ht::kNvIndex;
  const size_t at = nv ? 4 : 2;
  if (marshalled_area.size() < at + 2) return parse_error("a public area too short to hold its nameAlg");
  const uint16_t name_alg = static_cast<uint16_t>(marshalled_area[at] << 8 | marshalled_area[at + 1]);
  TPMSEC_ASSIGN_OR_RETURN(Bytes digest, crypto::hash(name_alg, {marshalled_area}));
  Bytes name{static_cast<uint8_t>(name_alg >> 8), static_cast<uint8_t>(name_alg)};
  name.insert(name.end(), digest.begin(), digest.end());
  return name;
}

Result<ScopedHandle> NullKey::create_checked(Tpm& tpm, Bytes* name, Public* out_public) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(kind_);
  // The ledger checked the handle (a transient object, not one in use) and owns it.
  TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(c, {Auth::password()}));
  ScopedHandle handle(tpm, rsp.object_handle);
  const Public& pub = rsp.out_public.public_area;
  // The TPM must have created what was asked: same template, filled-in unique.
  Public expected = null_key_template(kind_);
  expected.unique_x = pub.unique_x;
  expected.unique_y = pub.unique_y;
  if (!(pub == expected)) return integrity_error("the null key the TPM created does not match the template");
  TPMSEC_ASSIGN_OR_RETURN(Bytes computed, compute_name(pub));
  if (computed != rsp.name.bytes) {
    return integrity_error(fmt::format("the TPM reports null key name {} but its public area hashes to {}",
                                       to_hex(rsp.name.bytes), to_hex(computed)));
  }
  if (kind_ == SaltKind::kEcc) {
    TPMSEC_RETURN_IF_ERROR(crypto::check_point_on_curve(pub.curve, crypto::EccPoint{pub.unique_x, pub.unique_y}));
  } else if (pub.unique_x.size() != 256) {
    return integrity_error(fmt::format("RSA null key modulus is {} bytes, expected 256", pub.unique_x.size()));
  }
  *name = computed;
  *out_public = pub;
  return handle;
}

Status NullKey::save_and_flush(Tpm& tpm, ScopedHandle handle) {
  TPMSEC_ASSIGN_OR_RETURN(auto saved, tpm.run(cmd::ContextSave{named(handle.get())}));
  context_ = saved.context;
  return handle.flush();
}

std::string_view null_key_load_name(NullKeyLoad load) { return load == NullKeyLoad::kRecreate ? "recreate" : "reload"; }

Result<NullKey> NullKey::create_loaded(Tpm& tpm, SaltKind kind, std::optional<Bytes> pinned_name,
                                       const std::string& pin_origin, ScopedHandle* loaded) {
  NullKey key;
  key.kind_ = kind;
  TPMSEC_ASSIGN_OR_RETURN(ScopedHandle handle, key.create_checked(tpm, &key.name_, &key.public_));
  if (pinned_name && *pinned_name != key.name_) {
    return integrity_error(fmt::format("null key name {} differs from the pinned {} (TPM reset or substituted TPM){}",
                                       to_hex(key.name_), to_hex(*pinned_name),
                                       pin_origin.empty() ? "" : "; pinned by " + pin_origin))
        .with_reason(ErrorReason::kNullKeyChanged);
  }
  if (loaded) {
    key.load_ = NullKeyLoad::kRecreate;
    *loaded = std::move(handle);
  } else {
    TPMSEC_RETURN_IF_ERROR(key.save_and_flush(tpm, std::move(handle)));
  }
  return key;
}

Result<NullKey> NullKey::create(Tpm& tpm, SaltKind kind, std::optional<Bytes> pinned_name,
                                const std::string& pin_origin) {
  return create_loaded(tpm, kind, std::move(pinned_name), pin_origin, nullptr);
}

Result<ScopedHandle> NullKey::recreate(Tpm& tpm) {
  Bytes name;
  Public pub;
  TPMSEC_ASSIGN_OR_RETURN(ScopedHandle handle, create_checked(tpm, &name, &pub));
  if (name != name_ && accept_new_name_) {
    // A restored snapshot of an in-process TPM that was reset since: no bus,
    // so the new key is the TPM's own.
    name_ = name;
    public_ = pub;
    changed_ = true;
  } else if (name != name_) {
    return integrity_error(fmt::format("null key name changed: pinned {}, TPM now has {} (TPM reset or substituted "
                                       "TPM; re-pin explicitly if the reset was yours)",
                                       to_hex(name_), to_hex(name)))
        .with_reason(ErrorReason::kNullKeyChanged);
  }
  return handle;
}

Result<ScopedHandle> NullKey::load(Tpm& tpm) {
  if (load_ == NullKeyLoad::kRecreate) return recreate(tpm);
  auto loaded = tpm.run(cmd::ContextLoad{context_});
  if (loaded.ok()) return ScopedHandle(tpm, loaded->loaded_handle);
  if (loaded.error().kind() != ErrorKind::kTpm) return loaded.error();
  // The context no longer loads (TPM_RC_INTEGRITY after a reset): recreate
  // and insist on the pinned name.
  TPMSEC_ASSIGN_OR_RETURN(ScopedHandle handle, recreate(tpm));
  TPMSEC_ASSIGN_OR_RETURN(auto saved, tpm.run(cmd::ContextSave{named(handle.get())}));
  context_ = saved.context;
  changed_ = true;
  return handle;
}

Result<NullKey> NullKey::restore(const Snapshot& snapshot, bool pinned) {
  Public expected = null_key_template(snapshot.kind);
  expected.unique_x = snapshot.public_area.unique_x;
  expected.unique_y = snapshot.public_area.unique_y;
  if (!(snapshot.public_area == expected)) return parse_error("a kept null key does not match the template");
  TPMSEC_ASSIGN_OR_RETURN(Bytes computed, compute_name(snapshot.public_area));
  if (computed != snapshot.name) return parse_error("a kept null key's public area does not hash to its name");
  if (snapshot.context.blob.empty()) return parse_error("a kept null key has no context");
  NullKey key;
  key.kind_ = snapshot.kind;
  key.public_ = snapshot.public_area;
  key.name_ = snapshot.name;
  key.context_ = snapshot.context;
  key.accept_new_name_ = !pinned;
  return key;
}

Status NullKey::repin(Tpm& tpm) {
  TPMSEC_ASSIGN_OR_RETURN(ScopedHandle handle, create_checked(tpm, &name_, &public_));
  changed_ = true;
  if (load_ == NullKeyLoad::kRecreate) return handle.flush();
  return save_and_flush(tpm, std::move(handle));
}

std::string NullKey::name_hex() const { return to_hex(name_); }

}  // namespace tpmsec
