#include "audited_read.h"

#include "tpmsec/pcr.h"

namespace tpmsec::cli {

Result<std::unique_ptr<AuditedPcrReads>> AuditedPcrReads::start(const OpenTpm& open,
                                                                const ProtectionOptions& protection) {
  std::unique_ptr<AuditedPcrReads> reads(new AuditedPcrReads());
  reads->tpm_ = &open.tpm();
  TPMSEC_ASSIGN_OR_RETURN(reads->factory_,
                          protection.factory(open.tpm(), open.transport(), open.info(), SymDef::aes128_cfb()));
  TPMSEC_ASSIGN_OR_RETURN(reads->session_, reads->factory_->start(attr::kAudit | attr::kContinueSession));
  return reads;
}

Result<Bytes> AuditedPcrReads::read(uint16_t bank, uint32_t index) {
  Auth audit{session_.get(), {}};
  return pcr_read(*tpm_, bank, index, std::span<const Auth>(&audit, 1));
}

}  // namespace tpmsec::cli
