#include "tcti/open_protected.h"

namespace tpmsec::tcti {

Result<ProtectedSessions> open_protected(const ProtectRequest& request) {
  ProtectedSessions out;
  TPMSEC_ASSIGN_OR_RETURN(out.tpm, ProtectedTpm::open(request));
  TPMSEC_ASSIGN_OR_RETURN(out.factory, out.tpm->factory());
  return out;
}

}  // namespace tpmsec::tcti
