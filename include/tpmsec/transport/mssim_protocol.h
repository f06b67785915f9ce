// The Microsoft simulator's TCP protocol (the TPM 2.0 reference
// implementation's TpmTcpProtocol.h, as tpm2-tss's tcti-mssim speaks it):
// codes sent as big-endian u32 on the TPM port (kSendCommand, kSessionEnd)
// and on the platform port (the signals).
#ifndef TPMSEC_TRANSPORT_MSSIM_PROTOCOL_H_
#define TPMSEC_TRANSPORT_MSSIM_PROTOCOL_H_

#include <cstdint>

namespace tpmsec::mssim {

inline constexpr uint32_t kPowerOn = 1, kPowerOff = 2, kPhysPresOn = 3, kPhysPresOff = 4, kSendCommand = 8,
                          kCancelOn = 9, kCancelOff = 10, kNvOn = 11, kNvOff = 12, kKeyCacheOn = 13, kKeyCacheOff = 14,
                          kReset = 17, kRestart = 18, kSessionEnd = 20, kStop = 21;

}  // namespace tpmsec::mssim

#endif  // TPMSEC_TRANSPORT_MSSIM_PROTOCOL_H_
