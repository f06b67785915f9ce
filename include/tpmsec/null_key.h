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

#include "tpmsec/scoped_handle.h"
#include "tpmsec/structures.h"
#include "tpmsec/tpm.h"

namespace tpmsec {

enum class SaltKind { kEcc, kRsa };

// The TPMT_PUBLIC template of the null primary.
Public null_key_template(SaltKind kind);

// Name = nameAlg || H(TPMT_PUBLIC) (Part 1 §16), and of an NV index
// nameAlg || H(TPMS_NV_PUBLIC). The one name calculation.
Result<Bytes> compute_name(const Public& public_area);
Result<Bytes> compute_name(const NvPublic& nv_public);

// Parses a null-key name given as hex (68 digits for SHA-256) or as the path
// of a file holding it in the kernel's sysfs format.
Result<Bytes> parse_null_name(const std::string& hex_or_path);

class NullKey {
 public:
  // CreatePrimary(TPM_RH_NULL), checks the name and the public point, pins
  // the name (or compares it with `pinned_name`), then ContextSave and
  // FlushContext, leaving no object loaded (as the kernel does).
  // `pin_origin` names where the pin came from in the mismatch error (e.g.
  // "the kernel's pin /sys/class/tpm/tpm0/null_name"), with what to do.
  static Result<NullKey> create(Tpm& tpm, SaltKind kind, std::optional<Bytes> pinned_name = std::nullopt,
                                const std::string& pin_origin = "");

  // Loads the key for use (ContextLoad of the saved context). When the TPM
  // refuses the context (a TPM Reset invalidates it) the key is recreated and
  // its name compared with the pinned one: a different name is kIntegrity.
  Result<ScopedHandle> load(Tpm& tpm);

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
  Result<ScopedHandle> create_loaded(Tpm& tpm, Bytes* name, Public* out_public);
  Status save_and_flush(Tpm& tpm, ScopedHandle handle);

  SaltKind kind_ = SaltKind::kEcc;
  Bytes name_;
  Public public_;
  Context context_;
  bool accept_new_name_ = false;  // restored without a pin
  bool changed_ = false;
};

}  // namespace tpmsec

#endif  // TPMSEC_NULL_KEY_H_
