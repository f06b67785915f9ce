// The JSON object documented in docs/info-json.md for a TpmInfo. Separate from
// tpm_info.h so the core layer's headers do not pull nlohmann-json.
#ifndef TPMSEC_EMULATION_TPM_INFO_JSON_H_
#define TPMSEC_EMULATION_TPM_INFO_JSON_H_

#include <nlohmann/json.hpp>

#include "tpmsec/tpm_info.h"

namespace tpmsec {

nlohmann::json to_json(const TpmInfo& info);

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_TPM_INFO_JSON_H_
