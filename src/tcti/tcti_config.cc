#include "tcti/tcti_config.h"

#include <cstdlib>

#include "tcti/cut_config.h"
#include "tpmsec/tpm_config.h"

namespace tpmsec::tcti {

Result<TctiConfig> parse_tcti_config(std::string_view config) {
  // The one grammar of a TPM and its items, the CLI's --tpm's (tpm_config.h).
  TPMSEC_ASSIGN_OR_RETURN(TpmConfig c, parse_tpm_config(config));
  TPMSEC_RETURN_IF_ERROR(refuse_cut_config(c));
  TctiConfig out;
  out.request = request_of(c);
  // Nothing named: the host's TPM through the kernel's resource manager, as
  // tpm2-tss's device TCTI defaults to (never the TCTI's own environment,
  // which may name this TCTI again).
  out.request.tpm = c.tpm.empty() ? "device:/dev/tpmrm0" : c.tpm;
  out.log = c.log;
  out.strict = c.strict;
  if (out.log.empty()) {
    if (const char* env = std::getenv("TPMSEC_TCTI_LOG"); env && *env) out.log = env;
  }
  return out;
}

}  // namespace tpmsec::tcti
