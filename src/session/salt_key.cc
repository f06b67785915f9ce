#include "tpmsec/salt_key.h"

#include <fmt/format.h>

#include <optional>

#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/response_code.h"
#include "tpmsec/salt.h"
#include "tpmsec/scoped_handle.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

// A TPM-made key that cannot leave it: nobody outside knows its private part.
constexpr uint32_t kMadeInside = object_attr::kFixedTpm | object_attr::kFixedParent | object_attr::kSensitiveDataOrigin;

// A restricted decryption key, as an SRK is (TPM 2.0 Part 1, restricted
// decryption keys): the TPM decrypts with it only secrets of its own
// formats, each under its own KDF label (a salt "SECRET", a credential
// "IDENTITY", a duplicate "DUPLICATE"), and never returns a decrypted value
// or a shared point: TPM2_RSA_Decrypt and TPM2_ECDH_ZGen refuse it
// (TPM_RC_ATTRIBUTES, Part 3), so no one can have it recover a salt. Of
// these two bits only restricted may be set (decrypt is checked first).
constexpr uint32_t kStorageKey = object_attr::kRestricted | object_attr::kSign;

bool persistent(uint32_t handle) { return (handle >> 24) == ht::kPersistent; }

Status check_persistent(uint32_t handle) {
  if (persistent(handle)) return ok_status();
  return usage_error(fmt::format("0x{:08x} is not a persistent handle (0x81xxxxxx)", handle));
}

// The fields of `made` that differ from `asked`, but for unique (the key
// the TPM generated), comma-separated; empty when it is the key asked for.
std::string differences(const Public& made, const Public& asked) {
  std::string out;
  auto note = [&](bool differs, const char* field) {
    if (differs) out += fmt::format("{}{}", out.empty() ? "" : ", ", field);
  };
  note(made.type != asked.type, "type");
  note(made.name_alg != asked.name_alg, "nameAlg");
  note(made.attributes != asked.attributes, "objectAttributes");
  note(made.auth_policy != asked.auth_policy, "authPolicy");
  note(!(made.symmetric == asked.symmetric), "symmetric");
  note(!(made.scheme == asked.scheme), "scheme");
  note(made.curve != asked.curve, "curveID");
  note(!(made.kdf == asked.kdf), "kdf");
  note(made.key_bits != asked.key_bits, "keyBits");
  note(made.exponent != asked.exponent, "exponent");
  return out;
}

Status check_made_as_asked(const Public& made, const Public& asked, uint32_t handle) {
  std::string fields = differences(made, asked);
  if (fields.empty()) return ok_status();
  return integrity_error(
      fmt::format("the key made at 0x{:08x} is not the one asked for (it differs from the "
                  "template sent in: {}; rewritten on the way to the TPM?)",
                  handle, fields));
}

}  // namespace

SaltKind PersistentSaltKey::kind() const { return public_area.type == alg::kRsa ? SaltKind::kRsa : SaltKind::kEcc; }

Status check_salt_key_public(const Public& p) {
  if (p.name_alg != alg::kSha256) return integrity_error("the salt key's name algorithm is not SHA-256");
  if ((p.attributes & kMadeInside) != kMadeInside) {
    return integrity_error(
        "the key was not made inside the TPM or can leave it (fixedTPM, fixedParent and sensitiveDataOrigin must be "
        "set): someone else may know its private part, so a salt encrypted to it is not secret");
  }
  if (!(p.attributes & object_attr::kDecrypt)) return integrity_error("the key is not a decryption key");
  if ((p.attributes & kStorageKey) != object_attr::kRestricted) {
    return integrity_error(
        "the key is not a restricted decryption key (restricted set, sign clear, as an SRK is): whoever may use it "
        "can have the TPM decrypt any session's encrypted salt (RSA_Decrypt, ECDH_ZGen), so every session salted "
        "to it could be read and forged");
  }
  if (!(p.symmetric == SymDef::aes128_cfb())) {
    return integrity_error(
        fmt::format("the key's symmetric definition is not AES-128 CFB, the SRK template's (got "
                    "algorithm 0x{:04x}, {} bits, mode 0x{:04x})",
                    p.symmetric.algorithm, p.symmetric.key_bits, p.symmetric.mode));
  }
  if (p.type == alg::kEcc) {
    if (p.curve != curve::kNistP256) return integrity_error("the ECC key is not on NIST P-256");
    return crypto::check_point_on_curve(p.curve, crypto::EccPoint{p.unique_x, p.unique_y});
  }
  if (p.type == alg::kRsa) {
    if (p.key_bits != 2048 || p.unique_x.size() != 256) return integrity_error("the RSA key is not 2048 bits");
    return status_of(rsa_secret_hash(p));
  }
  return integrity_error(fmt::format("the key's type 0x{:04x} cannot take a salt (ECC or RSA)", p.type));
}

Result<PersistentSaltKey> pin_salt_key(SessionFactory& factory, uint32_t handle) {
  TPMSEC_RETURN_IF_ERROR(check_persistent(handle));
  if (!factory.keyed()) {
    return usage_error(
        "pinning a salt key needs a salted or bound session: an unsalted audit session is forgeable "
        "by an interposer who saw it start");
  }
  Tpm& tpm = factory.tpm();
  // The name goes into the audited command's cpHash, so it is read first,
  // as anyone would, unauthenticated. The audited read then returns what the
  // TPM holds under its HMAC: that, not the first answer, is what is pinned.
  auto first = tpm.run(cmd::ReadPublic{NamedHandle::of(handle)});
  if (!first.ok()) {
    if (rc_base(first.error().tpm_rc()) == rc::kHandle) {
      return usage_error(
          fmt::format("no key at 0x{:08x}: give the handle of an existing persistent key, or "
                      "--create to make one",
                      handle));
    }
    return first.error().with_context(fmt::format("ReadPublic(0x{:08x})", handle));
  }
  TPMSEC_ASSIGN_OR_RETURN(auto session, factory.start(attr::kAudit));
  Auth audit{session.get(), {}};
  auto rsp = tpm.run(cmd::ReadPublic{NamedHandle{handle, first->name.bytes}}, std::span<const Auth>(&audit, 1));
  if (!rsp.ok()) return rsp.error().with_context(fmt::format("audited ReadPublic(0x{:08x})", handle));
  PersistentSaltKey k;
  k.handle = handle;
  k.public_area = rsp->out_public.public_area;
  TPMSEC_ASSIGN_OR_RETURN(k.name, compute_name(k.public_area));
  if (k.name != rsp->name.bytes) {
    return integrity_error(fmt::format("the TPM reports the name {} for 0x{:08x}, but its public area hashes to {}",
                                       to_hex(rsp->name.bytes), handle, to_hex(k.name)));
  }
  if (Status st = check_salt_key_public(k.public_area); !st.ok()) {
    return Error(st.error().kind(), fmt::format("0x{:08x} cannot be the salt key: {}", handle, st.error().message()));
  }
  return k;
}

namespace {

// The salt key's template made a primary of the owner hierarchy and that
// made persistent at `handle`; the transient copy flushed either way.
Status evict_new_salt_key(Tpm& tpm, uint32_t handle, SaltKind kind) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kOwner);
  c.in_public.public_area = null_key_template(kind);
  auto created = tpm.run(c, {Auth::password()});
  if (!created.ok()) return created.error().with_context("CreatePrimary of the salt key (owner hierarchy)");
  ScopedHandle transient(tpm, created->object_handle);
  auto evicted =
      tpm.run(cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle{transient.get(), created->name.bytes}, handle},
              {Auth::password()});
  TPMSEC_RETURN_IF_ERROR(transient.flush());
  if (!evicted.ok()) return evicted.error().with_context(fmt::format("EvictControl to 0x{:08x}", handle));
  return ok_status();
}

}  // namespace

Result<PersistentSaltKey> create_salt_key(SessionFactory& factory, uint32_t handle, SaltKind kind) {
  TPMSEC_RETURN_IF_ERROR(check_persistent(handle));
  Tpm& tpm = factory.tpm();
  const Public wanted = null_key_template(kind);
  if (Status evicted = evict_new_salt_key(tpm, handle, kind); !evicted.ok()) {
    if (evicted.error().kind() == ErrorKind::kTpm && rc_base(evicted.error().tpm_rc()) == rc::kNvDefined) {
      return usage_error(
          fmt::format("0x{:08x} already holds a key: pin it without --create, or choose another "
                      "handle",
                      handle));
    }
    return evicted.error();
  }
  // The CreatePrimary answer proves nothing (an interposer can have rewritten
  // the template on the way in and the public area on the way out): what
  // must equal the template is the public area the audited ReadPublic
  // returns, the one that is pinned.
  auto pinned = pin_salt_key(factory, handle);
  Status as_asked = status_of(pinned);
  if (pinned.ok()) as_asked = check_made_as_asked(pinned->public_area, wanted, handle);
  if (!as_asked.ok()) {
    // Nothing half-made stays behind: the key is ours, so it goes again.
    auto gone =
        tpm.run(cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle::of(handle), handle}, {Auth::password()});
    const Error& e = as_asked.error();
    return Error(
        e.kind(),
        fmt::format("{}; {}", e.message(),
                    gone.ok() ? "the key made was evicted again"
                              : fmt::format("evicting the key made failed too: evict 0x{:08x} by hand", handle)),
        e.tpm_rc(), e.reason());
  }
  pinned->created = true;
  return pinned;
}

namespace {

// ReadPublic of `handle` with no session: its public area and name, the name
// held to the area; none when the handle holds nothing.
Result<std::optional<PersistentSaltKey>> read_unauthenticated(Tpm& tpm, uint32_t handle) {
  auto rsp = tpm.run(cmd::ReadPublic{NamedHandle::of(handle)});
  if (!rsp.ok()) {
    if (rc_base(rsp.error().tpm_rc()) == rc::kHandle) return std::optional<PersistentSaltKey>();
    return rsp.error().with_context(fmt::format("ReadPublic(0x{:08x})", handle));
  }
  PersistentSaltKey k;
  k.handle = handle;
  k.public_area = rsp->out_public.public_area;
  TPMSEC_ASSIGN_OR_RETURN(k.name, compute_name(k.public_area));
  if (k.name != rsp->name.bytes) {
    return integrity_error(fmt::format("the TPM reports the name {} for 0x{:08x}, but its public area hashes to {}",
                                       to_hex(rsp->name.bytes), handle, to_hex(k.name)));
  }
  return std::optional<PersistentSaltKey>(std::move(k));
}

}  // namespace

Result<PersistentSaltKey> salt_key_on_first_start(Tpm& tpm, uint32_t handle, SaltKind kind) {
  TPMSEC_RETURN_IF_ERROR(check_persistent(handle));
  TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> found, read_unauthenticated(tpm, handle));
  if (found) {
    if (Status st = check_salt_key_public(found->public_area); !st.ok()) {
      return Error(st.error().kind(),
                   fmt::format("0x{:08x} holds a key that cannot be the salt key: {}", handle, st.error().message()));
    }
    return std::move(*found);
  }
  if (Status evicted = evict_new_salt_key(tpm, handle, kind); !evicted.ok()) {
    return evicted.error();
  }
  TPMSEC_ASSIGN_OR_RETURN(found, read_unauthenticated(tpm, handle));
  Status made = found ? check_made_as_asked(found->public_area, null_key_template(kind), handle)
                      : runtime_error(fmt::format("0x{:08x} is empty after EvictControl", handle));
  if (!made.ok()) {
    (void)tpm.run(cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle::of(handle), handle}, {Auth::password()});
    return made.error();
  }
  found->created = true;
  return std::move(*found);
}

Status check_pinned_salt_key(SessionFactory& factory, const PersistentSaltKey& pinned) {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> now, read_unauthenticated(factory.tpm(), pinned.handle));
  if (!now) {
    return integrity_error(
        fmt::format("the pinned salt key {} is no longer at 0x{:08x} (evicted, or the TPM was cleared)",
                    to_hex(pinned.name), pinned.handle));
  }
  if (now->name != pinned.name) {
    return integrity_error(fmt::format("0x{:08x} holds the key {}, not the pinned salt key {} (swapped)", pinned.handle,
                                       to_hex(now->name), to_hex(pinned.name)));
  }
  TPMSEC_ASSIGN_OR_RETURN(PersistentSaltKey audited, pin_salt_key(factory, pinned.handle));
  if (audited.name != pinned.name) {
    return integrity_error(fmt::format("the TPM vouches for the key {} at 0x{:08x}, not the pinned salt key {}",
                                       to_hex(audited.name), pinned.handle, to_hex(pinned.name)));
  }
  return ok_status();
}

Status evict_salt_key(Tpm& tpm, const PersistentSaltKey& key) {
  auto r = tpm.run(cmd::EvictControl{NamedHandle::of(rh::kOwner), key.named(), key.handle}, {Auth::password()});
  if (!r.ok()) return r.error().with_context(fmt::format("EvictControl(0x{:08x})", key.handle));
  return ok_status();
}

}  // namespace tpmsec
