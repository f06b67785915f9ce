// Starts protected sessions the way Linux's tpm2_start_auth_session does:
// ContextLoad(null key), salted StartAuthSession, FlushContext(null key).
// Owns the pinned null key; every session it starts is salted to that key,
// so a TPM Reset or substituted TPM is caught before any command is sent.
#ifndef TPMSEC_SESSION_FACTORY_H_
#define TPMSEC_SESSION_FACTORY_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tpmsec/bind_secret.h"
#include "tpmsec/ek_key.h"
#include "tpmsec/ek_pin.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/salt_key.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {

struct ProtectionConfig {
  // kEcc unless the TPM lacks P-256 (choose_salt picks); kRsa forces RSA-OAEP.
  std::optional<SaltKind> salt;
  // Unsalted sessions authenticate but do not protect against an interposer
  // who saw StartAuthSession: for measurement only.
  bool unsalted = false;
  // How the salt key is trusted (docs/threat-model.md). A salted session is
  // only as good as the key its salt is encrypted to: an interposer that
  // answers CreatePrimary with its own key reads the salt. One of these must
  // hold unless the transport is in_process():
  //   pinned_null_name  the null key must have this name (the kernel's
  //                     /sys/class/tpm/tpmN/null_name, --null-name, a TOFU pin);
  //   ek_ca             salt to the TPM's endorsement key, proven by its EK
  //                     certificate chaining to a CA of this bundle (the
  //                     protect layer reads it: host_state.h, load_ca_bundle),
  //                     held to ek_pins and to a kernel pin (below);
  //   trust_first_use   accept the first null key seen (tests; --tofu, which
  //                     keeps it with on_first_use; measurement commands).
  // With none of them, create() refuses (kUsage) on a transport with a bus.
  std::optional<Bytes> pinned_null_name;
  std::string pin_origin;  // where the pin came from, for the mismatch error
  std::shared_ptr<const crypto::CaBundle> ek_ca;
  // With ek_ca: the EKs pinned for this TPM by earlier verified uses
  // (ek_pin.h). The EK of a pinned kind must have the pinned name, else
  // kIntegrity: a relay to another genuine TPM of the same CA. With no
  // --salt, a pinned kind is used (ECC first) rather than whichever
  // certificate the TPM shows now. ek_pin_origin says how to forget a pin.
  //
  // With ek_ca and pinned_null_name (the kernel's pin of a device: TPM),
  // the TPM holding the certified EK must also be the one the kernel
  // pinned: in a session salted to the EK, CreatePrimary(TPM_RH_NULL) must
  // answer with the pinned name (the response HMAC, which only the EK's
  // holder can compute, covers it). Skipped when the EK's pin says it was
  // proven this boot (EkPin::null_key_proven).
  std::vector<EkPin> ek_pins;
  std::string ek_pin_origin;
  // Called when an EK was verified with no pin of its kind (its first use),
  // or the null-key proof above was made: the CLI keeps it in the state
  // directory. A failure fails create().
  std::function<Status(const EkPin& verified)> on_ek_verified;
  bool trust_first_use = false;
  // Called once with the name of a null key accepted on first use, before
  // any session is salted to it (--tofu keeps it in the state directory).
  std::function<Status(const Bytes& name)> on_first_use;
  // A null key kept by an earlier process (session_cache.h): used instead of
  // a CreatePrimary when its name is the pinned one, or, with no pin, on an
  // in_process() TPM; ignored otherwise.
  std::optional<NullKey::Snapshot> kept_null_key;
  // How sessions get the null key loaded (null_key.h): the policy's choice
  // for this TPM model. kRecreate (ECC only) ignores kept_null_key: a
  // CreatePrimary held to the pin needs no saved context.
  NullKeyLoad null_key_load = NullKeyLoad::kReload;
  // A provisioned bind secret (bind_secret.h): sessions are then unsalted
  // and bound to its NV index; the secret is their anchor, so no salt key is
  // created or trusted. Takes the place of the salt-key anchors above.
  std::shared_ptr<const BindSecret> bind;
  // A persistent key pinned by `tpmsec provision --salt-key` (salt_key.h):
  // sessions are salted to it as it stands, with no null key to create,
  // load or flush. It is an anchor of its own: its public area was read in
  // an audited session salted to an anchor when it was pinned.
  std::optional<PersistentSaltKey> salt_key;
  SymDef symmetric = SymDef::aes128_cfb();
  uint16_t auth_hash = alg::kSha256;
  crypto::RandomSource* random = nullptr;
};

// ECC when the TPM has P-256, else RSA (SLB9665 firmware 5.x has no ECC).
SaltKind choose_salt(const TpmInfo& info);

// True when `config` names a trust anchor for the salt key (or needs none:
// unsalted sessions protect nothing anyway and say so).
bool has_trust_anchor(const ProtectionConfig& config);
// The refusal for a TPM behind a bus with no anchor (kUsage, reason
// kNoTrustAnchor): the front end adds which of its options name one.
Error missing_trust_anchor_error();

class SessionFactory {
 public:
  // Creates and pins the null key (unless unsalted). `info` decides the salt
  // when the config leaves it open; without info, ECC. Refuses (kUsage,
  // naming the options) when no trust anchor is configured and the TPM is
  // not in_process(): a salt key nobody vouches for protects nothing.
  static Result<std::unique_ptr<SessionFactory>> create(Tpm& tpm, const ProtectionConfig& config,
                                                        const TpmInfo* info = nullptr);

  // A new session with `attributes` (continueSession, decrypt, encrypt, audit).
  // A session that will carry parameter encryption is first checked to use
  // the cipher requested (check_cipher(): one Hash command):
  // StartAuthSession's symmetric definition is not authenticated otherwise.
  // CipherCheck::kDeferred leaves that to the caller, who must call
  // check_cipher() before the session's first command with decrypt or
  // encrypt set (a wrapper that may never encrypt saves the command).
  enum class CipherCheck { kNow, kDeferred };
  Result<std::unique_ptr<HmacSession>> start(uint8_t attributes, CipherCheck check = CipherCheck::kNow);
  // Proves with one Hash through `session` (decrypt and encrypt set, its
  // attributes restored after) that the TPM uses the cipher this factory
  // asked for; kIntegrity when the session start was altered on the bus.
  Status check_cipher(HmacSession& session);

  // Accept a new null key after a TPM Reset the caller knows about.
  Status repin();
  // The TPM was reset since this factory was made: a key it still holds
  // loaded for its first session went with the reset and is forgotten,
  // never flushed (the TPM may have given its handle to another key).
  void tpm_was_reset() { (void)loaded_null_key_.forget(); }

  const NullKey* null_key() const { return null_key_ ? &*null_key_ : nullptr; }
  // The endorsement key sessions are salted to when config().ek_ca is set.
  const EkKey* ek_key() const { return ek_key_ ? &*ek_key_ : nullptr; }
  // The pinned persistent key sessions are salted to, when config().salt_key is set.
  const PersistentSaltKey* salt_key() const {
    return config_.salt_key && !config_.unsalted ? &*config_.salt_key : nullptr;
  }
  // Sessions are salted (to the null key, the EK or a pinned persistent key).
  bool salted() const { return null_key_ || ek_key_ || salt_key(); }
  // Sessions are bound to a provisioned bind secret.
  bool bound() const { return config_.bind != nullptr; }
  // Session keys an interposer cannot compute: salted or bound.
  bool keyed() const { return salted() || bound(); }
  Tpm& tpm() { return *tpm_; }
  const ProtectionConfig& config() const { return config_; }

 private:
  Result<std::unique_ptr<HmacSession>> start_unchecked(uint8_t attributes);
  SessionFactory(Tpm& tpm, ProtectionConfig config) : tpm_(&tpm), config_(std::move(config)) {}

  Tpm* tpm_;
  ProtectionConfig config_;
  // At most one of these: the key every session is salted to.
  std::optional<NullKey> null_key_;
  std::optional<EkKey> ek_key_;
  // NullKeyLoad::kRecreate: the key create() made, still loaded, for the
  // first session (then flushed by it, or here if no session starts).
  ScopedHandle loaded_null_key_;
};

}  // namespace tpmsec

#endif  // TPMSEC_SESSION_FACTORY_H_
