// A TCTI configuration that arrived cut at a comma. systemd's /etc/crypttab
// splits its options at every comma unless written `\,` (systemd
// src/cryptsetup/cryptsetup.c, parse_crypt_config():
// EXTRACT_UNESCAPE_SEPARATORS), so
//   tpm2-device=tpmsec:swtpm:host=H,port=P,null-name=…
// reaches the TCTI as `swtpm:host=H`: a TPM on the default port, which may
// be another one, and no anchor. What the TCTI can tell is refused before
// it connects anywhere (docs/tcti.md, "/etc/crypttab").
#ifndef TPMSEC_SRC_TCTI_CUT_CONFIG_H_
#define TPMSEC_SRC_TCTI_CUT_CONFIG_H_

#include "tpmsec/result.h"
#include "tpmsec/tpm_config.h"

namespace tpmsec::tcti {

// kUsage, one line naming the crypttab escape, for a swtpm: or mssim: TPM
// given neither port= nor path= and no anchor item; ok otherwise (give
// port= to mean the default port).
Status refuse_cut_config(const TpmConfig& config);

}  // namespace tpmsec::tcti

#endif  // TPMSEC_SRC_TCTI_CUT_CONFIG_H_
