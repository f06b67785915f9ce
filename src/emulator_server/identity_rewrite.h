// The profile's identity in an unauthenticated GetCapability(TPM_PROPERTIES)
// answer: TPM_PT_MANUFACTURER, the vendor strings and the firmware version
// replaced by the profile's. An answer in a session is left alone: its HMAC
// covers the real values, so an audited read sees the real TPM
// (docs/threat-model.md).
#ifndef TPMSEC_SRC_EMULATOR_SERVER_IDENTITY_REWRITE_H_
#define TPMSEC_SRC_EMULATOR_SERVER_IDENTITY_REWRITE_H_

#include "tpmsec/bytes.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec::emulation {

void rewrite_identity(Bytes& response, ByteView command, const TpmInfo& identity);

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATOR_SERVER_IDENTITY_REWRITE_H_
