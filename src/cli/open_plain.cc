// The protect path's TPM (`pcr extend`, `random`, `provision` ... without
// --emulate): ProtectedTpm::open (protect.h), the one way in every front end
// takes, opens it, keeps what earlier runs kept and resolves the anchor.
// Nothing here reaches the measurement layer: no MeasuredTpm, no tracing, no
// latency model. scripts/check-layers checks that this object references no
// symbol the tpmsec_measure or tpmsec_emulation libraries define
// (docs/architecture.md), so keep it in its own translation unit
// (CMakeLists.txt: the protect batch).
#include "cli.h"

namespace tpmsec::cli {

Result<std::unique_ptr<ProtectedTpm>> open_plain_protected(const TpmOption& option, ProtectRequest request) {
  if (!option.emulate.empty()) return usage_error("the plain TPM path cannot emulate");
  TPMSEC_ASSIGN_OR_RETURN(request.tpm, option.tpm_string());
  TPMSEC_ASSIGN_OR_RETURN(TransportSpec spec, parse_transport_spec(request.tpm));
  // The library opens what is behind a bus; an in-process TPM (libtpms,
  // which the protect layer does not link) is opened here and handed in.
  if (spec.scheme != "embedded") return ProtectedTpm::open(request);
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, open_transport(request.tpm));
  return ProtectedTpm::open(request, std::move(transport));
}

}  // namespace tpmsec::cli
