// The one grammar of a TPM and its protection (docs/tcti.md): a TPM string
// (transport.h) with tpmsec's protection items appended as further
// comma-separated items, the same wherever a TPM is named — `tpmsec --tpm`,
// $TPMSEC_TPM, $TPM2TOOLS_TCTI=tpmsec:…, the TCTI's configuration:
//   swtpm:host=127.0.0.1,port=2321,null-name=000b…
//   device:/dev/tpmrm0,ek-ca=/etc/tpmsec/ek-ca,salt=rsa
// Items: null-name=HEX|FILE, ek-ca=PATH, tofu (at most one of the three),
// salt=ecc|rsa, policy=FILE, log=FILE (the TCTI's log), strict (the TCTI
// refuses what would cross in clear). Everything else belongs to the TPM
// string, in order. Errors are kUsage and name the item in this grammar's
// spelling; a front end says where the string came from.
#ifndef TPMSEC_TPM_CONFIG_H_
#define TPMSEC_TPM_CONFIG_H_

#include <string>
#include <string_view>

#include "tpmsec/protect.h"
#include "tpmsec/result.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {

struct TpmConfig {
  std::string tpm;        // the TPM string, items removed; empty: none named
  std::string null_name;  // at most one of null_name, ek_ca, tofu
  std::string ek_ca;
  bool tofu = false;
  std::string salt;  // "", "ecc" or "rsa"
  std::string policy;
  std::string log;
  bool strict = false;
  bool anchor() const { return !null_name.empty() || !ek_ca.empty() || tofu; }
  // Any protection item at all.
  bool has_items() const { return anchor() || !salt.empty() || !policy.empty() || !log.empty() || strict; }
};

// Splits `text` into its TPM string and items: kUsage naming the item for
// anything malformed or given twice. The TPM string is not checked here
// (parse_transport_spec does that).
Result<TpmConfig> parse_tpm_config(std::string_view text);

// The anchor, salt and policy items as a ProtectRequest's (tpm, anchor,
// salt, policy; the rest as default-constructed).
ProtectRequest request_of(const TpmConfig& config);

// The TPM a front end uses when none was given (choose_default_tpm(),
// transport.h), its items split off: $TPMSEC_TPM and the tpmsec TCTI's
// configuration in $TPM2TOOLS_TCTI may carry items. A malformed one is
// kUsage naming the variable.
struct ChosenTpm {
  std::string spec;  // the TPM string, items removed (config.tpm)
  TpmSpec parsed;    // what it names, parsed once here: nothing parses it again
  TpmSource source = TpmSource::kFallback;
  TpmConfig config;  // its items (none for a plain TPM string)
  // $TPM2TOOLS_TCTI named the tpmsec TCTI (tpmsec:CONFIG or its library
  // name); `spec` is its TPM string (device:/dev/tpmrm0 when it names none,
  // as the TCTI does).
  bool tcti = false;
  // The variable or flag the TPM came from, for messages ("TPM2TOOLS_TCTI").
  std::string_view origin() const;
  bool unnamed_simulator() const { return source == TpmSource::kFallback; }
};
Result<ChosenTpm> choose_tpm(const char* tpmsec_tpm, const char* tpm2tools_tcti, bool host_device);
// The same from this process's environment and the host's /dev.
Result<ChosenTpm> chosen_tpm();
// A TPM string the user gave (a --tpm flag) with its items split off.
Result<ChosenTpm> given_tpm(std::string_view text);

}  // namespace tpmsec

#endif  // TPMSEC_TPM_CONFIG_H_
