// "The manufacturer's word": an EK certificate (TCG EK Credential Profile §3) checked against a CA bundle
// the operator trusts, and the public key it certifies. The key is what a salted session's salt is
// encrypted to; the certificate is what makes it the TPM's key rather than a bus interposer's.
// Verification (OpenSSL 3, X509_verify_cert, then the EK profile here): only the bundle's CA certificates
// vouch; the chain must end at a self-signed CA of the bundle (no partial chains); the certificate must be
// an EK certificate (EKU tcg-kp-EKCertificate 2.23.133.8.1, not a CA, an EK's key usage); every
// certificate of the chain must be valid at one instant (now, or the caller's `at`); unknown critical
// extensions fail, the EK's critical subjectAltName (§3.2.9) excepted.
// Errors: a certificate that does not parse is kParse; one that does not verify or is not an EK
// certificate is kIntegrity, with the reason, subject and issuer; a bad bundle file is kUsage naming it.
// Ownership: a CaBundle owns its OpenSSL store (shared between copies); reading the files is the host's
// part (host_state.h). The functions keep no state of their own. No TPM is involved here.
// Each rule's reason (leaf certificates in a bundle, Intel PTT's and AMD fTPM's keyEncipherment, why an
// expired CA is refused rather than excepted): docs/sessions.md, "The endorsement key", and its
// subsection "What ek_certificate.h and ek_key.h rest on".
#ifndef TPMSEC_EK_CERTIFICATE_H_
#define TPMSEC_EK_CERTIFICATE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

struct x509_store_st;  // OpenSSL's X509_STORE

namespace tpmsec::crypto {

// A file of a CA bundle: its path and its content. Reading the files is the
// host's part (host_state.h: HostState::read_ca_files, load_ca_bundle).
struct PemFile {
  std::string name;
  std::string text;
};

// A CA file larger than this is not a CA bundle (the system bundle is ~200 KiB).
inline constexpr size_t kMaxCaFileBytes = 4u << 20;
// The most files a bundle directory may hold.
inline constexpr size_t kMaxCaBundleFiles = 1024;

// Certificates the operator trusts to vouch for EK certificates.
class CaBundle {
 public:
  // The CA certificates of the PEM files of bundle `file_or_dir` (a PEM file
  // of one or more certificates, or each regular file of a directory, not
  // recursive); other certificates are read and left out. A file that holds
  // no certificate, or a malformed one, fails with kUsage naming it; so does
  // a bundle with no CA certificate at all.
  static Result<CaBundle> from_pem_files(const std::string& file_or_dir, const std::vector<PemFile>& files);

  // Intermediates an administrator cached (no network at run time): each
  // file one certificate, DER or PEM, found by its file name — the last
  // path segment of a caIssuers URL in the Authority Information Access of
  // the certificate being verified (RFC 5280 §4.2.2.1), followed up to four
  // issuers deep. They are untrusted: a chain through them must still end
  // at a CA of the bundle. A file that is no certificate is kUsage naming it.
  Status add_intermediates(const std::vector<PemFile>& files);

  // How many CA certificates it holds.
  size_t size() const { return count_; }
  x509_store_st* store() const { return store_.get(); }

  struct Intermediates;  // file name -> certificate (ek_certificate.cc)
  const Intermediates* intermediates() const { return intermediates_.get(); }

 private:
  std::shared_ptr<x509_store_st> store_;
  size_t count_ = 0;
  std::shared_ptr<Intermediates> intermediates_;
};

// The public key of a certificate, in TPM terms.
struct CertifiedKey {
  uint16_t type = 0;            // alg::kRsa or alg::kEcc; 0 for any other key type
  std::string key_description;  // "RSA-2048", "EC P-256", "ED25519": for messages
  // RSA: the modulus (big-endian, no leading zero) and the public exponent.
  Bytes modulus;
  uint64_t exponent = 0;
  // ECC: the TPM curve id (0 if the TPM has none for it) and the affine
  // point, each coordinate padded to the curve's size.
  uint16_t curve = 0;
  Bytes x, y;
  // verify_ek_certificate: the subject of the bundle's CA the chain ended at.
  std::string root_subject;
};

// Parses a DER certificate (as read from the TPM's NV) and verifies it
// against `bundle`. A certificate that does not parse is kParse; one that
// does not verify (unknown issuer, bad signature, expired) or is not an EK
// certificate (see above) is kIntegrity, with the reason and the
// certificate's subject and issuer.
Result<CertifiedKey> verify_ek_certificate(ByteView der, const CaBundle& bundle);
// The same, with validity periods checked at `at` instead of now.
Result<CertifiedKey> verify_ek_certificate(ByteView der, const CaBundle& bundle,
                                           std::chrono::system_clock::time_point at);

// The same key read without verifying anything: for tests and diagnostics.
Result<CertifiedKey> certificate_public_key(ByteView der);

}  // namespace tpmsec::crypto

#endif  // TPMSEC_EK_CERTIFICATE_H_
