// "The manufacturer's word": an EK certificate (TCG EK Credential Profile
// §3) checked against a CA bundle the operator trusts, and the public key it
// certifies. The key is what a salted session's salt is encrypted to; the
// certificate is what makes it the TPM's key rather than a bus interposer's.
//
// Verification (OpenSSL 3, X509_verify_cert):
//   - trust anchors are every certificate in the bundle; an intermediate the
//     operator lists counts as an anchor (X509_V_FLAG_PARTIAL_CHAIN), so a
//     bundle need not reach the manufacturer's root;
//   - no purpose or extended key usage is required: EK certificates carry the
//     TCG's tcg-kp-EKCertificate (2.23.133.8.1), which no OpenSSL purpose names;
//   - validity periods are enforced (OpenSSL's default). An expired EK
//     certificate or CA is refused rather than trusted, at the cost of TPMs
//     whose manufacturer let a CA lapse; the operator can then anchor with
//     --null-name or --tofu. A silent exception for dates would be a choice
//     made for every operator.
//   - the certificate's critical subjectAltName (a directoryName with the
//     TPM manufacturer, model and version, EK Credential Profile §3.2.9) is
//     parsed by OpenSSL as any SAN; other unknown critical extensions fail.
#ifndef TPMSEC_EK_CERTIFICATE_H_
#define TPMSEC_EK_CERTIFICATE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

struct x509_store_st;  // OpenSSL's X509_STORE

namespace tpmsec::crypto {

// Certificates the operator trusts to vouch for EK certificates.
class CaBundle {
 public:
  // Every certificate in a PEM file (one or more), or in each regular file
  // of a directory (not recursive). A file that holds no certificate, or an
  // unreadable or malformed one, fails with kUsage naming it; so does a
  // bundle with no certificate at all.
  static Result<CaBundle> load(const std::string& file_or_dir);

  size_t size() const { return count_; }
  x509_store_st* store() const { return store_.get(); }

 private:
  std::shared_ptr<x509_store_st> store_;
  size_t count_ = 0;
};

// The public key of a certificate, in TPM terms.
struct CertifiedKey {
  uint16_t type = 0;      // alg::kRsa or alg::kEcc; 0 for any other key type
  std::string key_description;  // "RSA-2048", "EC P-256", "ED25519": for messages
  // RSA: the modulus (big-endian, no leading zero) and the public exponent.
  Bytes modulus;
  uint64_t exponent = 0;
  // ECC: the TPM curve id (0 if the TPM has none for it) and the affine
  // point, each coordinate padded to the curve's size.
  uint16_t curve = 0;
  Bytes x, y;
};

// Parses a DER certificate (as read from the TPM's NV) and verifies it
// against `bundle`. A certificate that does not parse is kParse; one that
// does not verify (unknown issuer, bad signature, expired) is kIntegrity,
// with OpenSSL's reason and the certificate's subject and issuer.
Result<CertifiedKey> verify_ek_certificate(ByteView der, const CaBundle& bundle);

// The same key read without verifying anything: for tests and diagnostics.
Result<CertifiedKey> certificate_public_key(ByteView der);

}  // namespace tpmsec::crypto

#endif  // TPMSEC_EK_CERTIFICATE_H_
