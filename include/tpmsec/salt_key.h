// A persistent salt key: a key that already lives in the TPM (systemd's SRK at 0x81000001, or one `tpmsec
// provision --salt-key --create` made), pinned once by its public area. Sessions are then salted to it as
// it stands: no CreatePrimary, no ContextLoad, no FlushContext of a null key. A one-shot protected extend
// is a salted StartAuthSession and the extend.
// As good an anchor as the pinned null key: the salt is encrypted to the public area kept here, so a TPM
// without its private part (a swapped chip, a key evicted and replaced at the same handle) cannot compute
// the session key, and the first response HMAC fails (kIntegrity).
// What it rests on: the public area pinned at provisioning, from an audited ReadPublic in a session salted
// to an anchor the user trusted then; the key's attributes (fixedTPM, fixedParent, sensitiveDataOrigin: the
// TPM made it, it cannot leave), and a restricted decryption key, as an SRK is (an unrestricted one would
// decrypt any session's salt for whoever may use it: TPM2_RSA_Decrypt, TPM2_ECDH_ZGen). Any other key is
// refused (check_salt_key_public), kIntegrity when an answer differs from what was asked or pinned.
// Ownership: PersistentSaltKey is a value; the key lives in the TPM, evicted only by evict_salt_key() (and
// `provision --remove` only if tpmsec made it). Not thread-safe: the Tpm's thread.
// Why and the attacks tested: docs/threat-model.md, "A pinned persistent salt key (tpmsec provision
// --salt-key)".
#ifndef TPMSEC_SALT_KEY_H_
#define TPMSEC_SALT_KEY_H_

#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/null_key.h"
#include "tpmsec/result.h"
#include "tpmsec/structures.h"

namespace tpmsec {

class SessionFactory;
class Tpm;

// The handle systemd (and the TCG provisioning guidance) gives the SRK.
inline constexpr uint32_t kDefaultSaltKeyHandle = 0x81000001;

struct PersistentSaltKey {
  uint32_t handle = 0;
  Public public_area;
  Bytes name;            // computed from public_area
  bool created = false;  // tpmsec made it: --remove evicts it
  SaltKind kind() const;
  NamedHandle named() const { return {handle, name}; }
};

// Whether `p` may serve as a salt key: a restricted decryption key (decrypt
// and restricted set, sign clear; symmetric AES-128 CFB, the SRK
// template's) made inside the TPM and bound to it (fixedTPM, fixedParent,
// sensitiveDataOrigin), ECC P-256 or RSA-2048, SHA-256 names. kIntegrity
// naming what is wrong otherwise. A kept file is held to the same check.
Status check_salt_key_public(const Public& p);

// Pins the key at `handle`: its public area read by ReadPublic in an audit
// session of `factory` (which must be keyed: salted to, or bound by, an
// anchor), so the TPM itself vouches for what is pinned. Refuses a key that
// check_salt_key_public refuses, and a handle outside the persistent range.
Result<PersistentSaltKey> pin_salt_key(SessionFactory& factory, uint32_t handle);

// Makes a salt key at `handle` (free): CreatePrimary in the owner hierarchy
// with the null key's template (the TCG SRK template that systemd also
// uses), EvictControl to `handle`, then pin_salt_key, and the pinned public
// area (the audited one, not CreatePrimary's unauthenticated answer) must
// be that template in every field but unique: kIntegrity otherwise (a
// rewritten template). On any failure after EvictControl the key is
// evicted again. Owner authorization is the empty password, as on a Linux
// machine that never took ownership.
Result<PersistentSaltKey> create_salt_key(SessionFactory& factory, uint32_t handle, SaltKind kind);

// Trust on first start (`tpmsec serve` with no anchor, protect.h): the key at
// `handle` as the TPM answers an unauthenticated ReadPublic, held to
// check_salt_key_public and to its own name (created false: adopted, e.g.
// systemd's SRK at 0x81000001); when the handle is empty, one made there as
// create_salt_key makes it, checked against the template (created true). An
// interposer present at this first start goes unnoticed; every later use is
// held to what is pinned (check_pinned_salt_key).
Result<PersistentSaltKey> salt_key_on_first_start(Tpm& tpm, uint32_t handle, SaltKind kind);

// The key at `pinned.handle` is still the pinned one: an unauthenticated
// ReadPublic must name it (a key evicted or swapped is kIntegrity, naming
// both), then an audited ReadPublic through a session of `factory` (salted
// to the pinned key) proves the TPM holds it.
Status check_pinned_salt_key(SessionFactory& factory, const PersistentSaltKey& pinned);

// EvictControl of the persistent key at `handle` (owner authorization).
Status evict_salt_key(Tpm& tpm, const PersistentSaltKey& key);

}  // namespace tpmsec

#endif  // TPMSEC_SALT_KEY_H_
