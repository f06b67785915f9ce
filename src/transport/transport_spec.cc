// open_transport(): every transport a TPM string can name, the embedded
// (in-process libtpms) one included. The bus transports and the TPM string
// syntax are in transport_string.cc (tpmsec_transports).
#include "tpmsec/transport.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec {

Result<std::unique_ptr<Transport>> open_transport(std::string_view text) {
  TPMSEC_ASSIGN_OR_RETURN(TransportSpec spec, parse_transport_spec(text));
  if (spec.scheme == "embedded") {
    auto state = spec.options.find("state");
    return open_embedded(state == spec.options.end() ? "" : state->second);
  }
  return open_bus_transport(text);
}

}  // namespace tpmsec
