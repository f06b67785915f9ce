// A TPM as a manufacturer ships it, for the --ek-ca tests: swtpm state
// provisioned by swtpm_setup with EK certificates issued by a local CA that
// lives in the test's own temporary directory (never the system's
// /var/lib/swtpm-localca), and that CA's certificates as an --ek-ca bundle.
#ifndef TPMSEC_TESTS_SUPPORT_EK_PROVISIONING_H_
#define TPMSEC_TESTS_SUPPORT_EK_PROVISIONING_H_

#include <string>
#include <vector>

#include "support/interposer.h"
#include "tpmsec/result.h"
#include "tpmsec/structures.h"
#include "tpmsec/tpm.h"

namespace tpmsec::testing {

struct ProvisionedTpm {
  std::string state_dir;    // swtpm's state: serve it with SwtpmProcess::use_state_dir
  std::string ca_dir;       // swtpm_localca's state: its keys and certificates
  std::string trust_dir;    // the root and intermediate certificates only: an --ek-ca directory
  std::string issuer_cert;  // the intermediate that signs the EK certificates (PEM)
  std::string root_cert;    // the local CA's root (PEM)
  std::string signing_key;  // the intermediate's private key (PEM)
};

// True when swtpm, swtpm_setup and swtpm_localca are installed.
bool have_swtpm_setup();

// Under `work_dir` (which must exist): a swtpm_localca configuration, a
// swtpm_setup configuration using it, and `swtpm_setup --tpm2
// --create-ek-cert`, which creates the RSA-2048 EK (template L-1) and its
// certificate at NV index 0x01C00002, and a P-384 ECC EK with its own.
// With `same_ca`, the EK certificates are issued by that TPM's CA (two
// genuine TPMs of one manufacturer) instead of a CA of its own.
Result<ProvisionedTpm> provision_tpm(const std::string& work_dir, const ProvisionedTpm* same_ca = nullptr);

// swtpm_setup 0.7 certifies a P-384 ECC EK, not the P-256 one at 0x01C0000A
// (EK Credential Profile template L-2). This adds it as a manufacturer
// would: creates the L-2 EK on `tpm`, has swtpm_cert issue its certificate
// signed by `ca`'s intermediate, and writes it to 0x01C0000A (NV_DefineSpace
// and NV_Write under the platform's empty authorization). `work_dir` holds
// the intermediate files.
Status add_ecc_p256_ek_certificate(Tpm& tpm, const ProvisionedTpm& ca, const std::string& work_dir);

// ---- Certificates of the test's own making (the openssl command) ----

// tcg-kp-EKCertificate, the extended key usage of EK certificates.
inline constexpr char kEkCertificateEku[] = "2.23.133.8.1";

// A key pair: `name`.key (private) and `name`.pub (public), PEM, in `dir`.
struct KeyFiles {
  std::string private_key;
  std::string public_key;
};
// A new key: `algorithm_args` as openssl genpkey takes them, e.g.
// {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"}.
Result<KeyFiles> make_key(const std::string& dir, const std::string& name,
                          const std::vector<std::string>& algorithm_args);
// The PEM public key file `dir`/`name`.pub of a TPM ECC P-256 public area
// (its point), e.g. the key an attacker substitutes for an EK.
Result<std::string> ecc_p256_public_key_file(const std::string& dir, const std::string& name, const Public& key);

struct CertificateSpec {
  std::string name;         // writes `dir`/name.pem and name.der; also the subject's CN
  std::string public_key;   // PEM public key certified; empty: the signer's own (self-signed)
  std::string issuer_cert;  // PEM certificate of the signer; empty: self-signed
  std::string issuer_key;   // PEM private key that signs
  bool ca = false;          // basicConstraints cA (always present, critical)
  std::string key_usage = "keyEncipherment,keyAgreement";  // empty: no keyUsage extension
  std::string extended_key_usage = kEkCertificateEku;      // empty: no extendedKeyUsage extension
  std::string extra_extensions;  // more openssl extension lines, e.g. "authorityInfoAccess = caIssuers;URI:..."
};
struct CertificateFiles {
  std::string pem;
  Bytes der;
};
// Issues the certificate (valid from now for a day) with `openssl x509 -new`.
Result<CertificateFiles> issue_certificate(const std::string& dir, const CertificateSpec& spec);

// An interposer's rule that makes the EK certificate at `nv_index` read as
// `der` (NV_ReadPublic answered with an index of that size, NV_Read with
// its bytes, as the TPM would under the password session) and hands every
// other command to `next`. `served` counts the NV_Reads answered.
Rule serve_ek_certificate(uint32_t nv_index, Bytes der, Rule next, size_t* served);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_EK_PROVISIONING_H_
