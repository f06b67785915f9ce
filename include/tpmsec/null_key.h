// The salt key: a primary in the null hierarchy, created with the template
// Linux uses (ECC P-256, "SRK template H") or its RSA-2048 twin for TPMs
// without ECC (Linux drivers/char/tpm/tpm2-sessions.c).
//
// Its name is computed here from the public area the TPM returned and must
// equal the name the TPM reports; it is pinned (the first name seen, or one
// the user gives, e.g. the kernel's /sys/class/tpm/tpm0/null_name) and every
// later re-creation must produce the same name. The null seed changes on
// every TPM Reset, so a different name means a reset or a substituted TPM:
// an integrity failure, never silently accepted.
#ifndef TPMSEC_NULL_KEY_H_
#define TPMSEC_NULL_KEY_H_

#include <optional>
#include <string>
#include <string_view>

#include "tpmsec/scoped_handle.h"
#include "tpmsec/structures.h"
#include "tpmsec/tpm.h"

namespace tpmsec {

enum class SaltKind { kEcc, kRsa };

// How a session gets the null key loaded: ContextLoad of its saved context
// (Linux's way: 37 ms against 219 ms for CreatePrimary on an SLB9670), or a
// fresh CreatePrimary held to the pinned name, where the chip creates the key
// faster than it loads a context (AMD fTPM: 11.6 against 36 ms). Either way
// the salt is encrypted to the pinned public area, so only a TPM holding the
// pinned key's private part can read it: the choice is one of cost only.
// The policy decides it per TPM model (policy.h, `null_key`), for the ECC
// key; an RSA null key (a TPM without P-256) is always reloaded, since RSA
// key generation takes seconds on every chip.
enum class NullKeyLoad { kReload, kRecreate };
std::string_view null_key_load_name(NullKeyLoad load);  // "reload", "recreate"

// The TPMT_PUBLIC template of the null primary.
Public null_key_template(SaltKind kind);

// Name = nameAlg || H(TPMT_PUBLIC) (Part 1 §16), and of an NV index
// nameAlg || H(TPMS_NV_PUBLIC). The one name calculation.
Result<Bytes> compute_name(const Public& public_area);
Result<Bytes> compute_name(const NvPublic& nv_public);
// The same of a public area as marshalled (a TPMT_PUBLIC or TPMS_NV_PUBLIC
// whose nameAlg is its second field), e.g. a Load's inPublic as sent.
Result<Bytes> compute_name(ByteView marshalled_area);

class NullKey {
 public:
  // CreatePrimary(TPM_RH_NULL), checks the name and the public point, pins
  // the name (or compares it with `pinned_name`), then ContextSave and
  // FlushContext, leaving no object loaded (as the kernel does).
  // `pin_origin` names where the pin came from in the mismatch error (e.g.
  // "the kernel's pin /sys/class/tpm/tpm0/null_name"), with what to do.
  static Result<NullKey> create(Tpm& tpm, SaltKind kind, std::optional<Bytes> pinned_name = std::nullopt,
                                const std::string& pin_origin = "");
  // The same for NullKeyLoad::kRecreate: the key stays loaded in `loaded`
  // for its first use (no ContextSave, no FlushContext), and every later
  // load() creates it again and holds it to the name.
  static Result<NullKey> create_loaded(Tpm& tpm, SaltKind kind, std::optional<Bytes> pinned_name,
                                       const std::string& pin_origin, ScopedHandle* loaded);

  // Loads the key for use (ContextLoad of the saved context). When the TPM
  // refuses the context (a TPM Reset invalidates it) the key is recreated and
  // its name compared with the pinned one: a different name is kIntegrity.
  // A key made by create_loaded() is created again instead, and held to its
  // name the same way.
  Result<ScopedHandle> load(Tpm& tpm);
  NullKeyLoad load_mode() const { return load_; }

  // After a TPM Reset the user explicitly accepts: recreate and pin the new name.
  Status repin(Tpm& tpm);

  // What a later process needs to use the key without CreatePrimary (230 ms
  // on an SLB9670, against 37 ms for a ContextLoad): its public area, its
  // name and its saved context. An object context loads any number of times
  // until the TPM Reset that changes the null seed.
  struct Snapshot {
    SaltKind kind = SaltKind::kEcc;
    Public public_area;
    Bytes name;
    Context context;
  };
  Snapshot snapshot() const { return {kind_, public_, name_, context_}; }
  // A key from a snapshot, checked: the template, and the name its public
  // area hashes to. No TPM command: load() sends the ContextLoad. When the
  // TPM refuses the context (a reset since the snapshot), load() recreates
  // the key; with `pinned` (the snapshot's name is the one a trust anchor
  // pinned) a different name is kIntegrity as always; without (an
  // in-process TPM, which has no bus to interpose on) the new key is taken.
  static Result<NullKey> restore(const Snapshot& snapshot, bool pinned);
  // True once load() recreated the key or took a new context: a snapshot
  // taken before is stale.
  bool changed() const { return changed_; }

  SaltKind kind() const { return kind_; }
  const Bytes& name() const { return name_; }
  const Public& public_area() const { return public_; }
  NamedHandle named(uint32_t handle) const { return {handle, name_}; }
  // Lowercase hex of the name, as /sys/class/tpm/tpm0/null_name shows it.
  std::string name_hex() const;

 private:
  // CreatePrimary + checks; returns the loaded handle.
  Result<ScopedHandle> create_checked(Tpm& tpm, Bytes* name, Public* out_public);
  // create_checked, then the name must be name_ (or, restored without a pin, becomes it).
  Result<ScopedHandle> recreate(Tpm& tpm);
  Status save_and_flush(Tpm& tpm, ScopedHandle handle);

  SaltKind kind_ = SaltKind::kEcc;
  Bytes name_;
  Public public_;
  Context context_;
  bool accept_new_name_ = false;  // restored without a pin
  bool changed_ = false;
  NullKeyLoad load_ = NullKeyLoad::kReload;
};

}  // namespace tpmsec

#endif  // TPMSEC_NULL_KEY_H_
