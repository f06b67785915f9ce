// The test's own connection to a TPM string (swtpm), bypassing any
// interposer: to read what the TPM really holds, and to clean up. swtpm
// serves one connection at a time: open one only while no client runs.
#ifndef TPMSEC_TESTS_SUPPORT_DIRECT_TPM_H_
#define TPMSEC_TESTS_SUPPORT_DIRECT_TPM_H_

#include <memory>
#include <string>
#include <vector>

#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"

namespace tpmsec::testing {

class Direct {
 public:
  // Adds a test failure when the TPM cannot be reached; ok() says so.
  explicit Direct(const std::string& spec);
  bool ok() const { return tpm_ != nullptr; }
  Tpm& tpm() { return *tpm_; }
  Transport& transport() { return *transport_; }

 private:
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Tpm> tpm_;
};

// The transient objects, loaded sessions and saved (active) sessions `tpm`
// holds (a failed listing is a test failure).
std::vector<uint32_t> list_handles(Tpm& tpm);

// The measurement a test client extends, and the one an attacker wants in
// the PCR instead.
const Bytes& client_digest();
const Bytes& attacker_digest();

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_DIRECT_TPM_H_
