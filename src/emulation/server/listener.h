// The server's listening sockets and the connections it accepts from them:
// non-blocking, TCP_NODELAY (a TPM command is one small frame).
#ifndef TPMSEC_SRC_EMULATION_SERVER_LISTENER_H_
#define TPMSEC_SRC_EMULATION_SERVER_LISTENER_H_

#include <string>

#include "tpmsec/result.h"
#include "tpmsec/transport/socket_io.h"

namespace tpmsec::emulation {

Result<io::Fd> listen_on(const std::string& host, uint16_t port);
// An invalid Fd when nothing was waiting.
io::Fd accept_client(const io::Fd& listener);

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATION_SERVER_LISTENER_H_
