// The Microsoft simulator's protocol (tpm2-tss tcti-mssim, TpmTcpProtocol.h):
// the codes both of its ports use.
#ifndef TPMSEC_SRC_EMULATION_SERVER_MSSIM_CHANNELS_H_
#define TPMSEC_SRC_EMULATION_SERVER_MSSIM_CHANNELS_H_

#include <cstdint>

namespace tpmsec::emulation::mssim {

inline constexpr uint32_t kPowerOn = 1, kPowerOff = 2, kPhysPresOn = 3, kPhysPresOff = 4, kSendCommand = 8,
                          kCancelOn = 9, kCancelOff = 10, kNvOn = 11, kNvOff = 12, kKeyCacheOn = 13,
                          kKeyCacheOff = 14, kReset = 17, kRestart = 18, kSessionEnd = 20, kStop = 21;

}  // namespace tpmsec::emulation::mssim

#endif  // TPMSEC_SRC_EMULATION_SERVER_MSSIM_CHANNELS_H_
