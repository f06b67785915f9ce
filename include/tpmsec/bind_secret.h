// A provisioned bind secret: an NV index whose authValue only this host
// knows, defined once by `tpmsec provision`. A session bound to it gets a
// key the bus never carried (sessionKey = KDFa(authValue || salt, "ATH",
// nonceTPM, nonceCaller), TPM 2.0 Library Part 1, "Session Key Creation"),
// without the salted StartAuthSession's asymmetric operation (85 ms on an
// SLB9670) or a salt key to trust: an unsalted, bound StartAuthSession is
// as short as any command. An interposer who does not know the secret can
// neither compute the key nor answer for a TPM that lacks it; a swapped TPM
// or a substituted index fails the first response HMAC.
//
// What it rests on (docs/threat-model.md): the secret file in the state
// directory (0600 in a 0700 directory), and the provisioning itself, whose
// NV_DefineSpace carried the secret under parameter encryption on a session
// salted to a trusted key.
#ifndef TPMSEC_BIND_SECRET_H_
#define TPMSEC_BIND_SECRET_H_

#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"
#include "tpmsec/structures.h"

namespace tpmsec {

class SessionFactory;
class Tpm;

// An owner-range index (TCG handle registry: 0x01000000-0x013FFFFF are the
// owner's); `tpmsec provision --nv-index` picks another.
inline constexpr uint32_t kDefaultBindIndex = 0x01005EC0;
inline constexpr size_t kBindSecretBytes = 32;

struct BindSecret {
  uint32_t nv_index = 0;
  Bytes name;          // the index's name, from the public area tpmsec defined
  SecretBytes secret;  // its authValue
};

// The public area of the bind index: ordinary, one byte, authorised by its
// authValue for read and write, exempt from dictionary-attack lockout (the
// secret is 32 random bytes), never written (so its name never changes).
NvPublic bind_index_public(uint32_t nv_index);
// Name of an NV index = nameAlg || H(TPMS_NV_PUBLIC) (Part 1, "Names").
Result<Bytes> nv_index_name(const NvPublic& nv_public);

// Defines the bind index with a fresh random secret. The NV_DefineSpace is
// authorised for the owner hierarchy (empty owner authValue) through a
// session of `factory` with parameter encryption, so the secret crosses the
// bus encrypted to the factory's salt key; `factory` must be salted. Then
// proves the TPM holds it: an audited command in a session bound to the
// new index must verify. On any failure after the define, the index is
// undefined again.
Result<BindSecret> provision_bind_secret(SessionFactory& factory, uint32_t nv_index);
// NV_UndefineSpace of the bind index (owner authorization).
Status undefine_bind_index(Tpm& tpm, uint32_t nv_index);

}  // namespace tpmsec

#endif  // TPMSEC_BIND_SECRET_H_
