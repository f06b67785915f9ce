// The salt key proven by the manufacturer's word: the TPM's endorsement key, whose public key an EK
// certificate (read from the TPM's NV) certifies and whose certificate chains to a CA bundle the operator
// trusts (--ek-ca; ek_certificate.h verifies it).
// The EK cannot be substituted as the null key can: its public area is built here from the certificate
// (TCG EK Credential Profile §2.1.5 template L-1 or L-2, unique = the certified key), never taken from the
// TPM; the salt is encrypted to that area; the name the TPM reports for CreatePrimary(TPM_RH_ENDORSEMENT)
// must equal that area's name (Part 1 §16).
// Ownership: an EkKey holds the public area, name and saved context; after create() nothing is loaded;
// load() returns a ScopedHandle (RAII: the caller's handle, flushed when it goes). Creating it again when
// the TPM refuses the context (a TPM Reset) checks the name again. Not thread-safe: the Tpm's thread.
// Errors: a name that differs is kIntegrity; a missing certificate index, or a key the template cannot
// hold, kUnsupported; the certificate's errors as ek_certificate.h returns them.
// It proves a genuine TPM, not this machine's: the session factory holds the EK to its pin (ek_pin.h)
// and, on a device: TPM, to the kernel's null-key pin (session_factory.h). Why and the attacks:
// docs/sessions.md, "The endorsement key", and "What ek_certificate.h and ek_key.h rest on".
#ifndef TPMSEC_EK_KEY_H_
#define TPMSEC_EK_KEY_H_

#include <cstdint>
#include <string>

#include "tpmsec/ek_certificate.h"
#include "tpmsec/null_key.h"
#include "tpmsec/scoped_handle.h"
#include "tpmsec/structures.h"
#include "tpmsec/tpm.h"

namespace tpmsec {

// EK certificate NV indices, low range (EK Credential Profile §2.2.1.4).
inline constexpr uint32_t kEkCertIndexRsa2048 = 0x01C00002;
inline constexpr uint32_t kEkCertIndexEccP256 = 0x01C0000A;
// The largest EK certificate read from NV: real ones are 1-2 KiB.
inline constexpr size_t kMaxEkCertificateBytes = 4096;

uint32_t ek_certificate_index(SaltKind kind);

// The default EK template (EK Credential Profile §2.1.5.1 template L-1 for
// RSA-2048, §2.1.5.2 template L-2 for ECC P-256), unique zero-filled to the
// key's size as the profile specifies.
Public ek_template(SaltKind kind);

// The EK's public area: the template with unique = the certified key.
// A key the template cannot hold (another type, size, curve or exponent) is
// kUnsupported, naming what the certificate has.
Result<Public> ek_public_from_certificate(SaltKind kind, const crypto::CertifiedKey& key);

// The DER bytes of the EK certificate at `nv_index`: NV_ReadPublic for its
// size (at most kMaxEkCertificateBytes), then NV_Read in chunks of at most
// TPM_PT_NV_BUFFER_MAX, authorized by the index (TPMA_NV_AUTHREAD) or the
// owner (TPMA_NV_OWNERREAD) with an empty password. An index the TPM does not
// have (or has not written) is kUnsupported.
Result<Bytes> read_ek_certificate(Tpm& tpm, uint32_t nv_index);

class EkKey {
 public:
  // Reads and verifies the EK certificate of `kind` against the CA bundle
  // `bundle` (host_state.h: load_ca_bundle), builds the EK's public
  // area from it, creates the EK (CreatePrimary(TPM_RH_ENDORSEMENT), empty
  // endorsement password) and requires the TPM's name to match; then
  // ContextSave and FlushContext, leaving nothing loaded.
  static Result<EkKey> create(Tpm& tpm, SaltKind kind, const crypto::CaBundle& bundle);
  // ECC P-256 when the TPM has that EK certificate, else RSA-2048.
  static Result<EkKey> create_preferred(Tpm& tpm, const crypto::CaBundle& bundle);

  // Loads the key for use (ContextLoad); when the TPM refuses the context,
  // creates the EK again and checks its name (kIntegrity if different).
  Result<ScopedHandle> load(Tpm& tpm);

  SaltKind kind() const { return kind_; }
  const Bytes& name() const { return name_; }
  // The subject of the bundle's CA its certificate chained to.
  const std::string& root_subject() const { return root_subject_; }
  const Public& public_area() const { return public_; }
  NamedHandle named(uint32_t handle) const { return {handle, name_}; }

 private:
  static Result<EkKey> from_certificate(Tpm& tpm, SaltKind kind, ByteView der, const crypto::CaBundle& bundle);
  // CreatePrimary(TPM_RH_ENDORSEMENT) + the name check; returns the loaded handle.
  Result<ScopedHandle> create_loaded(Tpm& tpm);

  SaltKind kind_ = SaltKind::kEcc;
  Public public_;
  Bytes name_;
  std::string root_subject_;
  Context context_;
};

}  // namespace tpmsec

#endif  // TPMSEC_EK_KEY_H_
