// What `tpmsec provision` keeps for a TPM, and forgetting what was learnt of
// one: library operations on the protect path (protect.h), so a front end
// only parses its arguments, calls one of these and words the result.
//
// A bind secret (bind_secret.h) or a pinned persistent salt key
// (salt_key.h) is kept in the host state of the ProtectedTpm (its request's,
// else the state directory), keyed by the TPM string (tpm_id.h). The session
// that carries a new one is salted to the ProtectedTpm's anchor; open it with
// use_provisioned off (what is kept must not vouch for itself) and keep on.
#ifndef TPMSEC_PROVISION_H_
#define TPMSEC_PROVISION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tpmsec/bind_secret.h"
#include "tpmsec/host_state.h"
#include "tpmsec/protect.h"
#include "tpmsec/result.h"
#include "tpmsec/salt_key.h"
#include "tpmsec/tpm_id.h"
#include "tpmsec/transport.h"

namespace tpmsec {

// What a provisioning step did, for the front end to word.
struct Provisioned {
  std::string tpm;      // the TPM string it is kept for
  std::string kept_in;  // where (HostState::where)
};

// Defines a bind secret at `nv_index` and keeps it. kUsage when the TPM ends
// with the process, one is kept already, or the anchor is Unsalted (the
// secret would cross where an interposer reads it).
Result<Provisioned> provision_bind(ProtectedTpm& tpm, uint32_t nv_index);
// Undefines the kept bind secret's index (already gone: `index_was_gone`)
// and forgets it; kUsage when none is kept.
struct RemovedBindSecret {
  std::string tpm;
  uint32_t nv_index = 0;
  bool index_was_gone = false;
};
Result<RemovedBindSecret> unprovision_bind(ProtectedTpm& tpm);

// Pins the persistent key at `handle` as the salt key (its public area read
// in an audited session salted to the anchor), first making it with
// `create`. kUsage when the TPM ends with the process, a key is pinned
// already, or the anchor is Unsalted.
struct PinnedSaltKey {
  Provisioned where;
  PersistentSaltKey key;
};
Result<PinnedSaltKey> provision_salt_key(ProtectedTpm& tpm, uint32_t handle, bool create);
// Forgets the pinned salt key, evicting it when tpmsec made it.
struct RemovedSaltKey {
  std::string tpm;
  PersistentSaltKey key;
  bool evicted = false;  // made by tpmsec and evicted now (else left, or already gone)
};
Result<RemovedSaltKey> unprovision_salt_key(ProtectedTpm& tpm);

// What is provisioned for the TPM `id` (tpm_id_of(), tpm_string.h) in `host`
// (none: the state directory), and where each is kept; an error reading one
// is its own. No TPM is asked.
struct ProvisionStatus {
  Result<std::optional<BindSecret>> bind_secret;
  std::string bind_secret_file;
  Result<std::optional<PersistentSaltKey>> salt_key;
  std::string salt_key_file;
};
ProvisionStatus provision_status(const TpmId& id, std::shared_ptr<HostState> host = nullptr);

// Forgets the trust-first-use and EK pins of the TPM `id` and what
// one-shot processes kept of it (after a TPM reset the operator caused, or a
// replaced TPM), in `host` (none: the state directory). Sends nothing to
// the TPM: it needs none (a TPM string's id is known without opening it).
struct ForgottenPins {
  std::string tpm;
  bool tofu_pin = false;
  bool ek_pin = false;
};
Result<ForgottenPins> forget_pins(const TpmId& id, std::shared_ptr<HostState> host = nullptr);

}  // namespace tpmsec

#endif  // TPMSEC_PROVISION_H_
