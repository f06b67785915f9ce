#include "tpmsec/ek_key.h"

#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/commands.h"
#include "tpmsec/crypto.h"

namespace tpmsec {
namespace {

// EK Credential Profile §2.1.5.1-2: fixedTPM | fixedParent |
// sensitiveDataOrigin | adminWithPolicy | restricted | decrypt (0x000300B2).
// No userWithAuth: the EK is used only under PolicyA; StartAuthSession's
// tpmKey needs no authorization at all.
constexpr uint32_t kEkAttributes = object_attr::kFixedTpm | object_attr::kFixedParent |
                                   object_attr::kSensitiveDataOrigin | object_attr::kAdminWithPolicy |
                                   object_attr::kRestricted | object_attr::kDecrypt;

// PolicyA_SHA256 (EK Credential Profile §2.1.4.1): PolicySecret(TPM_RH_ENDORSEMENT).
constexpr uint8_t kPolicyASha256[32] = {0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc,
                                        0x8d, 0x46, 0xa5, 0xd7, 0x24, 0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52,
                                        0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa};

// NV_Read chunk size when the TPM does not report TPM_PT_NV_BUFFER_MAX.
constexpr uint16_t kDefaultNvChunk = 512;

std::string describe(SaltKind kind) { return kind == SaltKind::kEcc ? "ECC P-256" : "RSA-2048"; }

std::string no_certificate(uint32_t index, SaltKind kind, const std::string& why) {
  // The front end names its other anchors (ErrorReason::kNoEkCertificate).
  return fmt::format(
      "the TPM has no {} EK certificate at NV index 0x{:08x} ({}); without one the EK cannot prove "
      "the salt key",
      describe(kind), index, why);
}

// TPM_PT_NV_BUFFER_MAX (Part 2 §6.13), capped at what a TPM2B_MAX_NV_BUFFER holds here.
uint16_t nv_chunk_size(Tpm& tpm) {
  auto rsp = tpm.run(cmd::GetCapability{cap::kTpmProperties, pt::kNvBufferMax, 1});
  if (!rsp.ok()) return kDefaultNvChunk;
  for (const TaggedProperty& p : rsp->capability_data.properties) {
    if (p.property == pt::kNvBufferMax && p.value > 0) {
      return static_cast<uint16_t>(std::min<uint32_t>(p.value, Tpm2bMaxNvBuffer::kMax));
    }
  }
  return kDefaultNvChunk;
}

}  // namespace

uint32_t ek_certificate_index(SaltKind kind) {
  return kind == SaltKind::kEcc ? kEkCertIndexEccP256 : kEkCertIndexRsa2048;
}

Public ek_template(SaltKind kind) {
  Public p;
  p.name_alg = alg::kSha256;
  p.attributes = kEkAttributes;
  p.auth_policy.assign(std::begin(kPolicyASha256), std::end(kPolicyASha256));
  p.symmetric = SymDef::aes128_cfb();
  if (kind == SaltKind::kEcc) {
    p.type = alg::kEcc;
    p.curve = curve::kNistP256;
    p.unique_x.assign(32, 0);
    p.unique_y.assign(32, 0);
  } else {
    p.type = alg::kRsa;
    p.key_bits = 2048;
    p.exponent = 0;  // 2^16 + 1
    p.unique_x.assign(256, 0);
  }
  return p;
}

Result<Public> ek_public_from_certificate(SaltKind kind, const crypto::CertifiedKey& key) {
  Public p = ek_template(kind);
  auto refuse = [&] {
    return unsupported_error(
        fmt::format("the EK certificate certifies an {} key; the {} EK (template {}) needs {}", key.key_description,
                    describe(kind), kind == SaltKind::kEcc ? "L-2" : "L-1",
                    kind == SaltKind::kEcc ? "an EC P-256 key" : "an RSA-2048 key with exponent 65537"));
  };
  if (kind == SaltKind::kEcc) {
    if (key.type != alg::kEcc || key.curve != curve::kNistP256 || key.x.size() != 32 || key.y.size() != 32) {
      return refuse();
    }
    TPMSEC_RETURN_IF_ERROR(crypto::check_point_on_curve(curve::kNistP256, crypto::EccPoint{key.x, key.y}));
    p.unique_x = key.x;
    p.unique_y = key.y;
  } else {
    if (key.type != alg::kRsa || key.modulus.size() != 256 || key.exponent != 65537) return refuse();
    p.unique_x = key.modulus;
  }
  return p;
}

Result<Bytes> read_ek_certificate(Tpm& tpm, uint32_t nv_index) {
  SaltKind kind = nv_index == kEkCertIndexEccP256 ? SaltKind::kEcc : SaltKind::kRsa;
  auto read_public = tpm.run(cmd::NvReadPublic{NamedHandle::of(nv_index)});
  if (!read_public.ok()) {
    if (read_public.error().kind() != ErrorKind::kTpm) return read_public.error();
    return unsupported_error(no_certificate(nv_index, kind, "NV_ReadPublic: " + read_public.error().message()))
        .with_reason(ErrorReason::kNoEkCertificate);
  }
  // Nothing in this response is authenticated: it only decides how much to
  // read, and is held to what an EK certificate index can be.
  const NvPublic& nv = read_public->nv_public.nv_public;
  if (nv.nv_index != nv_index) {
    return integrity_error(fmt::format("NV_ReadPublic(0x{:08x}) answered for index 0x{:08x}", nv_index, nv.nv_index));
  }
  if ((nv.attributes & nv_attr::kTypeMask) != 0) {
    return unsupported_error(
        fmt::format("NV index 0x{:08x} is not an ordinary index (attributes 0x{:08x})", nv_index, nv.attributes));
  }
  if (!(nv.attributes & nv_attr::kWritten) || nv.data_size == 0) {
    return unsupported_error(no_certificate(nv_index, kind, "the index was never written"))
        .with_reason(ErrorReason::kNoEkCertificate);
  }
  if (nv.data_size > kMaxEkCertificateBytes) {
    return parse_error(fmt::format("NV index 0x{:08x} says it holds {} bytes; an EK certificate is at most {}",
                                   nv_index, nv.data_size, kMaxEkCertificateBytes));
  }
  if (nv.attributes & nv_attr::kReadLocked) {
    return unsupported_error(fmt::format("EK certificate index 0x{:08x} is read-locked", nv_index));
  }
  // The index's own (empty) authValue where the index allows it, as the EK
  // Credential Profile's indices do; else the owner's, assumed empty.
  NamedHandle index{nv_index, {}};
  TPMSEC_ASSIGN_OR_RETURN(Bytes marshalled, marshal_to_bytes(nv));
  TPMSEC_ASSIGN_OR_RETURN(Bytes digest, crypto::hash(nv.name_alg, {marshalled}));
  index.name = {static_cast<uint8_t>(nv.name_alg >> 8), static_cast<uint8_t>(nv.name_alg)};
  index.name.insert(index.name.end(), digest.begin(), digest.end());
  NamedHandle auth;
  if (nv.attributes & nv_attr::kAuthRead) {
    auth = index;
  } else if (nv.attributes & nv_attr::kOwnerRead) {
    auth = NamedHandle::of(rh::kOwner);
  } else {
    return unsupported_error(
        fmt::format("EK certificate index 0x{:08x} allows neither AUTHREAD nor OWNERREAD "
                    "(attributes 0x{:08x})",
                    nv_index, nv.attributes));
  }

  const uint16_t chunk = nv_chunk_size(tpm);
  Bytes der;
  der.reserve(nv.data_size);
  while (der.size() < nv.data_size) {
    uint16_t offset = static_cast<uint16_t>(der.size());
    uint16_t want = static_cast<uint16_t>(std::min<size_t>(chunk, nv.data_size - der.size()));
    auto rsp = tpm.run(cmd::NvRead{auth, index, want, offset}, {Auth::password()});
    if (!rsp.ok()) {
      return rsp.error().with_context(fmt::format("reading the EK certificate at NV index 0x{:08x}", nv_index));
    }
    if (rsp->data.bytes.size() != want) {
      return parse_error(fmt::format("NV_Read of {} bytes at offset {} of 0x{:08x} returned {}", want, offset, nv_index,
                                     rsp->data.bytes.size()));
    }
    der.insert(der.end(), rsp->data.bytes.begin(), rsp->data.bytes.end());
  }
  return der;
}

Result<EkKey> EkKey::create(Tpm& tpm, SaltKind kind, const crypto::CaBundle& bundle) {
  TPMSEC_ASSIGN_OR_RETURN(Bytes der, read_ek_certificate(tpm, ek_certificate_index(kind)));
  return from_certificate(tpm, kind, der, bundle);
}

Result<EkKey> EkKey::create_preferred(Tpm& tpm, const crypto::CaBundle& bundle) {
  auto ecc = read_ek_certificate(tpm, kEkCertIndexEccP256);
  if (ecc.ok()) return from_certificate(tpm, SaltKind::kEcc, *ecc, bundle);
  if (ecc.error().kind() != ErrorKind::kUnsupported) return ecc.error();
  // No ECC certificate: RSA. (Whoever made the ECC index look absent gains
  // nothing: the RSA certificate is verified the same way.)
  auto rsa = read_ek_certificate(tpm, kEkCertIndexRsa2048);
  if (!rsa.ok()) {
    if (rsa.error().kind() != ErrorKind::kUnsupported) return rsa.error();
    return unsupported_error(fmt::format("the TPM has no EK certificate at NV index 0x{:08x} (ECC P-256) or "
                                         "0x{:08x} (RSA-2048); without one the EK cannot prove the salt key",
                                         kEkCertIndexEccP256, kEkCertIndexRsa2048))
        .with_reason(ErrorReason::kNoEkCertificate);
  }
  return from_certificate(tpm, SaltKind::kRsa, *rsa, bundle);
}

Result<EkKey> EkKey::from_certificate(Tpm& tpm, SaltKind kind, ByteView der, const crypto::CaBundle& bundle) {
  auto certified = crypto::verify_ek_certificate(der, bundle);
  if (!certified.ok()) {
    return certified.error().with_context(
        fmt::format("EK certificate at NV index 0x{:08x}", ek_certificate_index(kind)));
  }
  EkKey key;
  key.kind_ = kind;
  key.root_subject_ = certified->root_subject;
  TPMSEC_ASSIGN_OR_RETURN(key.public_, ek_public_from_certificate(kind, *certified));
  TPMSEC_ASSIGN_OR_RETURN(key.name_, compute_name(key.public_));
  TPMSEC_ASSIGN_OR_RETURN(ScopedHandle handle, key.create_loaded(tpm));
  TPMSEC_ASSIGN_OR_RETURN(auto saved, tpm.run(cmd::ContextSave{key.named(handle.get())}));
  key.context_ = saved.context;
  TPMSEC_RETURN_IF_ERROR(handle.flush());
  return key;
}

Result<ScopedHandle> EkKey::create_loaded(Tpm& tpm) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kEndorsement);
  c.in_public.public_area = ek_template(kind_);
  auto rsp = tpm.run(c, {Auth::password()});
  if (!rsp.ok()) {
    return rsp.error().with_context(
        fmt::format("creating the {} EK (CreatePrimary in the endorsement hierarchy, empty endorsement password)",
                    describe(kind_)));
  }
  ScopedHandle handle(tpm, rsp->object_handle);
  // Only the name is compared: the salt is encrypted to public_ (from the
  // certificate) whatever the response's public area says.
  if (rsp->name.bytes != name_) {
    return integrity_error(
        fmt::format("the TPM's {} endorsement key has name {} but its EK certificate certifies "
                    "the key named {}: the key was substituted on the bus, or the certificate "
                    "belongs to another TPM",
                    describe(kind_), to_hex(rsp->name.bytes), to_hex(name_)));
  }
  return handle;
}

Result<ScopedHandle> EkKey::load(Tpm& tpm) {
  auto loaded = tpm.run(cmd::ContextLoad{context_});
  if (loaded.ok()) return ScopedHandle(tpm, loaded->loaded_handle);
  if (loaded.error().kind() != ErrorKind::kTpm) return loaded.error();
  // The context no longer loads (a TPM Reset): the endorsement seed survives
  // resets, so the same template gives the same key, and its name must match.
  TPMSEC_ASSIGN_OR_RETURN(ScopedHandle handle, create_loaded(tpm));
  TPMSEC_ASSIGN_OR_RETURN(auto saved, tpm.run(cmd::ContextSave{named(handle.get())}));
  context_ = saved.context;
  return handle;
}

}  // namespace tpmsec
