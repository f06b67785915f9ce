#include "tcti/tcti_config.h"

#include <cstdlib>

#include "tcti/cut_config.h"
#include "tpmsec/transport.h"

namespace tpmsec::tcti {

Result<TctiConfig> parse_tcti_config(std::string_view config) {
  // One parser of the items, shared with the CLI's $TPM2TOOLS_TCTI (transport.h).
  TPMSEC_ASSIGN_OR_RETURN(TpmsecTctiConfig c, parse_tpmsec_tcti_config(config));
  TPMSEC_RETURN_IF_ERROR(refuse_cut_config(c));
  TctiConfig out;
  if (!c.null_name.empty()) out.request.anchor = anchor::NullName{c.null_name};
  if (!c.ek_ca.empty()) out.request.anchor = anchor::EkCa{c.ek_ca};
  if (c.tofu) out.request.anchor = anchor::Tofu{};
  if (c.salt == "ecc") out.request.salt = SaltKind::kEcc;
  if (c.salt == "rsa") out.request.salt = SaltKind::kRsa;
  out.request.policy = c.policy;
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
