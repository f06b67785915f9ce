// The protect path's TPM (`pcr extend`, `random`, `provision` ... without
// --emulate): open_transport() opens the TPM the command resolved (the
// embedded one as any other), and ProtectedTpm::open (protect.h), the one
// way in every front end takes, keeps what earlier runs kept and resolves
// the anchor.
// Nothing here reaches the measurement layer: no MeasuredTpm, no tracing, no
// latency model. scripts/check-layers checks that this object references no
// symbol the tpmsec_measure or tpmsec_emulation libraries define
// (docs/architecture.md), so keep it in its own translation unit
// (CMakeLists.txt: the protect batch).
#include "cli.h"

namespace tpmsec::cli {

Result<std::unique_ptr<ProtectedTpm>> open_plain_protected(const TpmOption& option, ProtectRequest request) {
  if (!option.emulate.empty()) return usage_error("the plain TPM path cannot emulate");
  const Result<ResolvedTpm>& tpm = option.resolved();
  if (!tpm.ok()) return tpm.error();
  request.tpm = tpm->tpm;
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, open_transport(tpm->spec));
  return ProtectedTpm::open(request, std::move(transport));
}

}  // namespace tpmsec::cli
