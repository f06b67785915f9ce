// AuditedPcrReads (protect.h): PCR reads whose responses an audit session
// authenticates.
#include "tpmsec/pcr.h"
#include "tpmsec/protect.h"

namespace tpmsec {

Result<std::unique_ptr<AuditedPcrReads>> ProtectedTpm::audited_pcr_reads() {
  std::unique_ptr<AuditedPcrReads> reads(new AuditedPcrReads());
  reads->tpm_ = tpm_.get();
  TPMSEC_ASSIGN_OR_RETURN(reads->factory_, factory());
  TPMSEC_ASSIGN_OR_RETURN(reads->session_, reads->factory_->start(attr::kAudit | attr::kContinueSession));
  return reads;
}

Result<Bytes> AuditedPcrReads::read(uint16_t bank, uint32_t index) {
  Auth audit{session_.get(), {}};
  return pcr_read(*tpm_, bank, index, std::span<const Auth>(&audit, 1));
}

}  // namespace tpmsec
