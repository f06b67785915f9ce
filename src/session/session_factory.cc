#include "tpmsec/session_factory.h"

#include <fmt/format.h>

#include "tpmsec/commands.h"
#include "tpmsec/crypto.h"

namespace tpmsec {

SaltKind choose_salt(const TpmInfo& info) { return info.ecc_p256 ? SaltKind::kEcc : SaltKind::kRsa; }

bool has_trust_anchor(const ProtectionConfig& config) {
  return config.unsalted || config.bind || config.salt_key || config.pinned_null_name || config.ek_ca ||
         config.trust_first_use;
}

Error missing_trust_anchor_error() {
  // The front end names its options for the anchors (ErrorReason::kNoTrustAnchor).
  return usage_error(
             "no trust anchor for the salt key: an interposer on the bus could answer with its own key and forge "
             "every response")
      .with_reason(ErrorReason::kNoTrustAnchor);
}

namespace {

// The kept null key, when it may stand in for a CreatePrimary: its name is
// the pinned one (so a TPM that refuses its context must produce that name
// again), or the TPM is in-process and needs no anchor.
std::optional<NullKey> usable_kept_key(const Tpm& tpm, const ProtectionConfig& config, SaltKind kind) {
  const auto& kept = config.kept_null_key;
  if (!kept || kept->kind != kind) return std::nullopt;
  const bool pinned = config.pinned_null_name.has_value();
  if (pinned ? kept->name != *config.pinned_null_name : !tpm.transport().in_process()) return std::nullopt;
  auto key = NullKey::restore(*kept, pinned);
  if (!key.ok()) return std::nullopt;
  return std::move(*key);
}

// StartAuthSession salted to `salt_key` (a NullKey or an EkKey: anything
// with load(), named() and public_area()), loaded for just this command.
// `loaded`: the key already loaded (its first use after a CreatePrimary).
template <class SaltKey>
Result<std::unique_ptr<HmacSession>> start_salted(Tpm& tpm, SaltKey& salt_key, SessionOptions options,
                                                  ScopedHandle loaded = {}) {
  ScopedHandle key = std::move(loaded);
  if (!key) {
    TPMSEC_ASSIGN_OR_RETURN(key, salt_key.load(tpm));
  }
  NamedHandle key_handle = salt_key.named(key.get());
  options.tpm_key = &key_handle;
  options.tpm_key_public = &salt_key.public_area();
  auto session = HmacSession::start(tpm, options);
  // The key is flushed whether or not the session started; a session error
  // is the one worth reporting.
  Status flushed = key.flush();
  if (!session.ok()) return session;
  TPMSEC_RETURN_IF_ERROR(flushed);
  return session;
}

// The name of the primary `area` makes in `hierarchy`, as the TPM holding
// `ek` reports it: CreatePrimary authorized by a session salted to the EK
// (empty hierarchy authorization). Only the holder of the certified private
// key can recover that salt, and the response HMAC (computed with the
// session key) covers outName: an answer relayed from another TPM, or
// forged, does not verify (kIntegrity from Tpm). The session ends with the
// command (no continueSession) and the object is flushed.
Result<Bytes> name_shown_by_ek_holder(Tpm& tpm, EkKey& ek, const ProtectionConfig& config, uint32_t hierarchy,
                                      const Public& area) {
  SessionOptions options;
  options.auth_hash = config.auth_hash;
  options.symmetric = config.symmetric;
  options.attributes = 0;
  options.random = config.random;
  TPMSEC_ASSIGN_OR_RETURN(auto session, start_salted(tpm, ek, options));
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(hierarchy);
  c.in_public.public_area = area;
  auto rsp = tpm.run(c, {Auth{session.get(), {}}});
  if (!rsp.ok()) return rsp.error().with_context("CreatePrimary in a session salted to the EK");
  ScopedHandle created(tpm, rsp->object_handle);
  TPMSEC_RETURN_IF_ERROR(created.flush());
  return rsp->name.bytes;
}

const EkPin* pin_of(const ProtectionConfig& config, SaltKind kind) {
  for (const EkPin& pin : config.ek_pins) {
    if (pin.kind == kind) return &pin;
  }
  return nullptr;
}

// The EK its certificate proves (ECC or RSA as asked; else a kind pinned
// for this TPM, ECC first; else whichever certificate the TPM has, ECC
// first), held to its pin and, with a kernel pin, to the null key.
Result<EkKey> anchored_ek(Tpm& tpm, const ProtectionConfig& config, const TpmInfo* info) {
  std::optional<SaltKind> kind = config.salt;
  if (!kind && pin_of(config, SaltKind::kEcc)) kind = SaltKind::kEcc;
  if (!kind && pin_of(config, SaltKind::kRsa)) kind = SaltKind::kRsa;
  TPMSEC_ASSIGN_OR_RETURN(
      EkKey key, kind ? EkKey::create(tpm, *kind, *config.ek_ca) : EkKey::create_preferred(tpm, *config.ek_ca));
  const EkPin* pin = pin_of(config, key.kind());
  if (pin && pin->name != key.name()) {
    return integrity_error(fmt::format(
        "the TPM's certified EK is {}, but this TPM's EK was pinned as {}: another "
        "genuine TPM answers in its place (a relay on the bus){}",
        to_hex(key.name()), to_hex(pin->name), config.ek_pin_origin.empty() ? "" : "; " + config.ek_pin_origin));
  }
  // The first use of one kind while the other is pinned: the TPM holding
  // the new EK must hold the pinned one too, or a relay could pin another
  // TPM's EK of the other kind.
  for (const EkPin& other : config.ek_pins) {
    if (pin || other.kind == key.kind()) continue;
    TPMSEC_ASSIGN_OR_RETURN(Bytes shown,
                            name_shown_by_ek_holder(tpm, key, config, rh::kEndorsement, ek_template(other.kind)));
    if (shown != other.name) {
      return integrity_error(
          fmt::format("the TPM holding the certified EK has another {} EK ({}) than the one "
                      "pinned for this TPM ({}): the commands are relayed to another TPM{}",
                      other.kind == SaltKind::kEcc ? "ECC" : "RSA", to_hex(shown), to_hex(other.name),
                      config.ek_pin_origin.empty() ? "" : "; " + config.ek_pin_origin));
    }
  }
  bool prove = config.pinned_null_name && !(pin && pin->null_key_proven);
  if (prove) {
    // The kernel pins the null key of its own choice of type: ECC P-256
    // when the TPM has it (as choose_salt), whatever the EK's type.
    SaltKind null_kind = info ? choose_salt(*info) : SaltKind::kEcc;
    TPMSEC_ASSIGN_OR_RETURN(Bytes shown,
                            name_shown_by_ek_holder(tpm, key, config, rh::kNull, null_key_template(null_kind)));
    if (shown != *config.pinned_null_name) {
      return integrity_error(
          fmt::format("the TPM holding the certified EK has null key {}, not {} pinned by {}: "
                      "the commands are relayed to another TPM",
                      to_hex(shown), to_hex(*config.pinned_null_name), config.pin_origin));
    }
  }
  if ((!pin || prove) && config.on_ek_verified) {
    TPMSEC_RETURN_IF_ERROR(config.on_ek_verified(EkPin{key.kind(), key.name(), prove}));
  }
  return key;
}

}  // namespace

Result<std::unique_ptr<SessionFactory>> SessionFactory::create(Tpm& tpm, const ProtectionConfig& config,
                                                               const TpmInfo* info) {
  if (!has_trust_anchor(config) && !tpm.transport().in_process()) return missing_trust_anchor_error();
  std::unique_ptr<SessionFactory> f(new SessionFactory(tpm, config));
  if (config.bind) {
    // Bound to the provisioned secret: the key needs no salt.
    if (config.unsalted || config.ek_ca) {
      return usage_error("a bind secret takes the place of a salt: not with an unsalted session or an EK anchor");
    }
    return f;
  }
  if (config.salt_key && !config.unsalted) {
    // A pinned persistent key: nothing to create or load.
    if (config.ek_ca) return usage_error("a pinned salt key takes the place of the EK anchor: not both");
    if (config.salt && *config.salt != config.salt_key->kind()) {
      return usage_error(fmt::format("the pinned salt key at 0x{:08x} is {}: an {} salt cannot be used with it",
                                     config.salt_key->handle, config.salt_key->kind() == SaltKind::kRsa ? "RSA" : "ECC",
                                     *config.salt == SaltKind::kRsa ? "RSA" : "ECC"));
    }
    f->config_.salt = config.salt_key->kind();
    return f;
  }
  if (!config.unsalted && config.ek_ca) {
    TPMSEC_ASSIGN_OR_RETURN(EkKey key, anchored_ek(tpm, config, info));
    f->config_.salt = key.kind();
    f->ek_key_ = std::move(key);
  } else if (!config.unsalted) {
    SaltKind kind = config.salt ? *config.salt : (info ? choose_salt(*info) : SaltKind::kEcc);
    f->config_.salt = kind;
    // RSA keys take seconds to generate on every chip: reloaded always.
    const bool recreate = config.null_key_load == NullKeyLoad::kRecreate && kind == SaltKind::kEcc;
    if (!recreate) {
      if (std::optional<NullKey> kept = usable_kept_key(tpm, config, kind)) {
        f->null_key_ = std::move(*kept);
        return f;
      }
    }
    // kRecreate: the key stays loaded for the first session.
    TPMSEC_ASSIGN_OR_RETURN(NullKey key, NullKey::create_loaded(tpm, kind, config.pinned_null_name, config.pin_origin,
                                                                recreate ? &f->loaded_null_key_ : nullptr));
    if (!config.pinned_null_name && config.on_first_use) TPMSEC_RETURN_IF_ERROR(config.on_first_use(key.name()));
    f->null_key_ = std::move(key);
  }
  return f;
}

namespace {

// StartAuthSession's symmetric definition is covered by no HMAC: an
// interposer can rewrite it (AES-128 to AES-256, or to XOR) and each side then
// encrypts with a different key while every HMAC still verifies, so decrypted
// parameters would be garbage accepted as genuine. Before a session carries
// parameter encryption, a Hash of a known message through it with decrypt and
// encrypt proves the TPM uses the cipher we do.
Status check_session_cipher(Tpm& tpm, HmacSession& session) {
  static constexpr std::string_view kProbe = "tpmsec: session cipher check";
  uint8_t wanted = session.attributes();
  session.set_attributes(attr::kDecrypt | attr::kEncrypt | attr::kContinueSession);
  cmd::Hash probe;
  probe.data.bytes.assign(kProbe.begin(), kProbe.end());
  auto rsp = tpm.run(probe, {Auth{&session, {}}});
  session.set_attributes(wanted);
  if (!rsp.ok()) return rsp.error().with_context("session cipher check");
  TPMSEC_ASSIGN_OR_RETURN(Bytes expected, crypto::hash(alg::kSha256, {as_bytes(kProbe)}));
  if (!crypto::constant_time_equal(expected, rsp->out_hash.bytes)) {
    return integrity_error(
        "the session's parameter encryption differs from what was requested: its "
        "StartAuthSession was altered on the bus");
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<HmacSession>> SessionFactory::start(uint8_t attributes, CipherCheck check) {
  TPMSEC_ASSIGN_OR_RETURN(auto session, start_unchecked(attributes));
  if (check == CipherCheck::kNow && (attributes & (attr::kDecrypt | attr::kEncrypt))) {
    TPMSEC_RETURN_IF_ERROR(check_session_cipher(*tpm_, *session));
  }
  return session;
}

Status SessionFactory::check_cipher(HmacSession& session) { return check_session_cipher(*tpm_, session); }

Result<std::unique_ptr<HmacSession>> SessionFactory::start_unchecked(uint8_t attributes) {
  SessionOptions options;
  options.auth_hash = config_.auth_hash;
  options.symmetric = config_.symmetric;
  options.attributes = attributes;
  options.random = config_.random;
  if (config_.bind) {
    NamedHandle bind{config_.bind->nv_index, config_.bind->name};
    options.bind = &bind;
    options.bind_auth = config_.bind->secret.view();
    return HmacSession::start(*tpm_, options);
  }
  if (const PersistentSaltKey* key = salt_key()) {
    NamedHandle key_handle = key->named();
    options.tpm_key = &key_handle;
    options.tpm_key_public = &key->public_area;
    return HmacSession::start(*tpm_, options);
  }
  if (ek_key_) return start_salted(*tpm_, *ek_key_, options);
  if (null_key_) return start_salted(*tpm_, *null_key_, options, std::move(loaded_null_key_));
  return HmacSession::start(*tpm_, options);
}

Status SessionFactory::repin() {
  if (!null_key_) return ok_status();
  return null_key_->repin(*tpm_);
}

}  // namespace tpmsec
