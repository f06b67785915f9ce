// PCR reads whose responses an audit session authenticates, on a salt key
// anchored as the protection options say: `pcr read --protect audit` and
// `verify --tpm`, so that an interposer can neither fake a value nor go
// unnoticed rewriting one.
#ifndef TPMSEC_SRC_CLI_AUDITED_READ_H_
#define TPMSEC_SRC_CLI_AUDITED_READ_H_

#include <memory>

#include "cli.h"
#include "protection_options.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/session_factory.h"

namespace tpmsec::cli {

class AuditedPcrReads {
 public:
  // One audit session (continued across reads) on `open`'s TPM.
  static Result<std::unique_ptr<AuditedPcrReads>> start(const OpenTpm& open, const ProtectionOptions& protection);
  // PCR_Read of one PCR, its response authenticated by the session.
  Result<Bytes> read(uint16_t bank, uint32_t index);

 private:
  AuditedPcrReads() = default;
  Tpm* tpm_ = nullptr;
  std::unique_ptr<SessionFactory> factory_;  // outlives the session it started
  std::unique_ptr<HmacSession> session_;
};

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_AUDITED_READ_H_
