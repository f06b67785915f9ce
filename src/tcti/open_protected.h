// The TCTI's one way to its TPM and its sessions: the protect path
// (tpmsec/protect.h), shared with the CLI.
#ifndef TPMSEC_SRC_TCTI_OPEN_PROTECTED_H_
#define TPMSEC_SRC_TCTI_OPEN_PROTECTED_H_

#include <memory>

#include "tpmsec/protect.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"

namespace tpmsec::tcti {

// An open TPM and the factory of its sessions, held to the request's anchor.
struct ProtectedSessions {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Tpm> tpm;
  std::unique_ptr<SessionFactory> factory;
};

Result<ProtectedSessions> open_protected(const ProtectRequest& request);

}  // namespace tpmsec::tcti

#endif  // TPMSEC_SRC_TCTI_OPEN_PROTECTED_H_
