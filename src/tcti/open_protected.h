// The TCTI's one way to its TPM and its sessions: the protect path
// (tpmsec/protect.h, ProtectedTpm::open), the one the CLI takes.
#ifndef TPMSEC_SRC_TCTI_OPEN_PROTECTED_H_
#define TPMSEC_SRC_TCTI_OPEN_PROTECTED_H_

#include <memory>

#include "tpmsec/protect.h"
#include "tpmsec/session_factory.h"

namespace tpmsec::tcti {

// An open TPM with its anchor resolved, and the factory of its sessions:
// none when the TPM is a tpmsec server (ProtectedTpm::served()), whose own
// session goes on every command; frames then pass through unchanged.
struct ProtectedSessions {
  std::unique_ptr<ProtectedTpm> tpm;
  std::unique_ptr<SessionFactory> factory;  // on tpm->tpm(); destroyed first; null when served
};

// Uses and updates what earlier processes kept for this TPM (request.keep).
Result<ProtectedSessions> open_protected(ProtectRequest request);

}  // namespace tpmsec::tcti

#endif  // TPMSEC_SRC_TCTI_OPEN_PROTECTED_H_
