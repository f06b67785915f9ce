// What a one-shot protected command keeps between processes, so that each run costs what Linux's
// per-command session costs (ContextLoad of the null key, salted StartAuthSession, FlushContext, the
// command) and not a CreatePrimary and four GetCapability calls more. Kept per TPM string and per host
// boot, like a TOFU pin, in the host's state (host_state.h): the TPM's plain capabilities, the null key's
// public area, name and saved context, the sessions of programs a TCTI re-signs (KeptCallerSession), and
// per program the command the TCTI's session last went on.
// Trust: nothing kept is an anchor. Capabilities stay unauthenticated and decide only what an
// unauthenticated read may decide; a kept null key is used only when its name equals the pin of the anchor
// in force (or on an in-process TPM); a per-program count is only a guess.
// Ownership: a SessionCache shares the HostState it is given (shared_ptr). Not thread-safe: one per
// process's protect path.
// Errors: a record that does not read back is ignored (replaced by the next put): a bad cache is never a
// reason to fail; one the host may not trust (another user's file, a symbolic link) is kRuntime naming it.
// Why each item is safe to keep: docs/threat-model.md, "What one process keeps for the next", and its
// subsection "What session_cache.h keeps for a TCTI".
#ifndef TPMSEC_SESSION_CACHE_H_
#define TPMSEC_SESSION_CACHE_H_

#include <memory>
#include <optional>
#include <string>

#include "tpmsec/host_state.h"
#include "tpmsec/null_key.h"
#include "tpmsec/tpm_id.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {

class SessionCache {
 public:
  // The cache of `tpm` for `boot_id`, kept in `host`.
  SessionCache(std::shared_ptr<HostState> host, TpmId tpm, std::string boot_id);

  // What is kept for this TPM and boot; none when nothing is, or it is of
  // another boot. A record that does not read back is ignored (and replaced
  // by the next put): a bad cache is never a reason to fail. One the host
  // may not trust (host_state.h: another user's file, a symbolic link) is:
  // kRuntime naming it.
  Result<std::optional<TpmInfo>> info() const;
  Result<std::optional<NullKey::Snapshot>> null_key(SaltKind kind) const;

  Status put_info(const TpmInfo& info);
  Status put_null_key(const NullKey::Snapshot& key);
  Result<std::optional<uint64_t>> command_count(const ProgramId& program) const;
  Status put_command_count(const ProgramId& program, uint64_t count);
  Result<std::optional<KeptCallerSession>> caller_session(uint32_t handle) const;
  Status put_caller_session(const KeptCallerSession& session);
  Status drop_caller_session(uint32_t handle);
  // Removes the kept capabilities (the TPM changed: they are read afresh).
  Status drop_info();
  // Removes everything kept for this TPM; true when something was.
  Result<bool> forget();

 private:
  std::shared_ptr<HostState> host_;
  TpmId tpm_;
  std::string boot_;
};

// What `cache` keeps of the TPM's capabilities (SessionCache::info()); none
// without a cache.
Result<std::optional<TpmInfo>> kept_info_of(const std::optional<SessionCache>& cache);

}  // namespace tpmsec

#endif  // TPMSEC_SESSION_CACHE_H_
