#include "tcti/open_protected.h"

namespace tpmsec::tcti {

Result<ProtectedSessions> open_protected(ProtectRequest request) {
  // Like the CLI's commands: what an earlier process learnt of this TPM (its
  // capabilities, its null key's saved context) is used and kept, so a
  // program's session costs a ContextLoad, not a CreatePrimary and a dozen
  // capability reads (protect.h, ProtectRequest::keep).
  request.keep = true;
  // A program killed mid-run leaves the session (or the null key) loaded on
  // a TPM without a resource manager: the next start flushes what a dead
  // process's record names, and this one's handles are recorded
  // (held_handles.h).
  request.track_handles = true;
  ProtectedSessions out;
  TPMSEC_ASSIGN_OR_RETURN(out.tpm, ProtectedTpm::open(request));
  // A tpmsec server wraps every command itself: no session of ours.
  if (out.tpm->served()) return out;
  // Its sessions run as the policy tunes them for this chip (the null key
  // reloaded, or recreated where that is faster), as the CLI's do.
  TPMSEC_ASSIGN_OR_RETURN(ProtectedTpm::Sessions sessions, out.tpm->open_sessions());
  out.factory = std::move(sessions.factory);
  return out;
}

}  // namespace tpmsec::tcti
