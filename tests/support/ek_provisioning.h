// A TPM as a manufacturer ships it, for the --ek-ca tests: swtpm state
// provisioned by swtpm_setup with EK certificates issued by a local CA that
// lives in the test's own temporary directory (never the system's
// /var/lib/swtpm-localca), and that CA's certificates as an --ek-ca bundle.
#ifndef TPMSEC_TESTS_SUPPORT_EK_PROVISIONING_H_
#define TPMSEC_TESTS_SUPPORT_EK_PROVISIONING_H_

#include <string>

#include "tpmsec/result.h"
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
Result<ProvisionedTpm> provision_tpm(const std::string& work_dir);

// swtpm_setup 0.7 certifies a P-384 ECC EK, not the P-256 one at 0x01C0000A
// (EK Credential Profile template L-2). This adds it as a manufacturer
// would: creates the L-2 EK on `tpm`, has swtpm_cert issue its certificate
// signed by `ca`'s intermediate, and writes it to 0x01C0000A (NV_DefineSpace
// and NV_Write under the platform's empty authorization). `work_dir` holds
// the intermediate files.
Status add_ecc_p256_ek_certificate(Tpm& tpm, const ProvisionedTpm& ca, const std::string& work_dir);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_EK_PROVISIONING_H_
