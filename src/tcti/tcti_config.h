// The TCTI's configuration string: a tpmsec TPM string with the protection
// options appended as further comma-separated items, named as the CLI's
// flags (docs/tcti.md) — the one grammar the CLI's --tpm takes too, parsed by
// the protect layer (tpmsec/tpm_config.h):
//   swtpm:host=127.0.0.1,port=2321,null-name=000b…
//   device:/dev/tpmrm0,ek-ca=/etc/tpmsec/ek-ca,salt=rsa,log=/var/log/tpmsec-tcti.log
// Items: null-name=HEX|FILE, ek-ca=PATH, tofu, salt=ecc|rsa, policy=FILE,
// log=FILE, strict. Everything else belongs to the TPM string, in order.
#ifndef TPMSEC_SRC_TCTI_TCTI_CONFIG_H_
#define TPMSEC_SRC_TCTI_TCTI_CONFIG_H_

#include <string>
#include <string_view>

#include "tpmsec/protect.h"
#include "tpmsec/result.h"

namespace tpmsec::tcti {

struct TctiConfig {
  ProtectRequest request;  // tpm, anchor, salt, policy
  std::string log;         // log=FILE, else $TPMSEC_TCTI_LOG, else none
  bool strict = false;     // strict: refuse a command whose secret would cross in clear
};

// kUsage naming the item for anything malformed or given twice.
Result<TctiConfig> parse_tcti_config(std::string_view config);

// The options, for the refusal when no anchor is on a bus and for config_help.
inline constexpr const char* kTctiOptionsHelp =
    "TPM string (device:PATH, swtpm:host=H,port=P, mssim:host=H,port=P) followed by ,null-name=HEX|FILE "
    "or ,ek-ca=PATH or ,tofu; optionally ,salt=ecc|rsa ,policy=FILE ,log=FILE ,strict. Or serve[:path=SOCKET]: "
    "a tpmsec server, which puts its own session on every command (frames pass through)";

}  // namespace tpmsec::tcti

#endif  // TPMSEC_SRC_TCTI_TCTI_CONFIG_H_
