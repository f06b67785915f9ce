// Startup and Shutdown as the transports send them around platform events
// (power on, _TPM_Init, suspend), beneath the command pipeline.
#ifndef TPMSEC_SRC_TRANSPORT_STARTUP_H_
#define TPMSEC_SRC_TRANSPORT_STARTUP_H_

#include <cstdint>

#include "tpmsec/transport.h"

namespace tpmsec {

// Sends TPM2_Startup(type) or TPM2_Shutdown(type) through `transport` and
// returns the response code (the caller decides which codes are fine).
Result<uint32_t> send_startup(Transport& transport, uint16_t startup_type);
Result<uint32_t> send_shutdown(Transport& transport, uint16_t shutdown_type);

// TPM2_Shutdown(STATE), the first half of a suspend: an error unless the
// TPM saved its state.
Status shutdown_state(Transport& transport);

}  // namespace tpmsec

#endif  // TPMSEC_SRC_TRANSPORT_STARTUP_H_
