// open_transport(): every transport a TPM string can name, the embedded
// (in-process libtpms) one included. The bus transports and the TPM string
// syntax are in transport_string.cc (tpmsec_transports).
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec {

Result<std::unique_ptr<Transport>> open_transport(std::string_view text) {
  TPMSEC_ASSIGN_OR_RETURN(TpmSpec spec, parse_transport_spec(text));
  return open_transport(spec);
}

Result<std::unique_ptr<Transport>> open_transport(const TpmSpec& spec) {
  if (spec.kind != TpmKind::kEmbedded) return open_bus_transport(spec);
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> embedded, open_embedded(spec.option("state")));
  embedded->set_spec(spec);
  return embedded;
}

}  // namespace tpmsec
