// What a one-shot protected command keeps between processes, so that each
// run costs what Linux's per-command session costs (ContextLoad of the null
// key, salted StartAuthSession, FlushContext, the command) and not a
// CreatePrimary and four GetCapability calls more.
//
// Kept per TPM string and per host boot, like a TOFU pin, in the host's
// state (host_state.h; FileHostState: STATE_DIR/session-cache/, readable
// only by the owner):
//   - the TPM's plain capabilities (tpm_info.h): they are unauthenticated
//     wherever they come from, and decide only what an unauthenticated read
//     may decide (the salt kind, PCR checks, a policy choice among
//     preventing strategies: docs/threat-model.md);
//   - the null key's public area, name and saved context. It is not a trust
//     anchor: it is used only when its name equals the pin of the anchor in
//     force (the kernel's, --null-name, this boot's --tofu pin), or on an
//     in-process TPM that needs none. The salt is encrypted to the kept
//     public key, so a TPM without its private key cannot read it; a context
//     the TPM refuses makes tpmsec recreate the key and hold it to the pin;
//   - the sessions of programs that a TCTI re-signs (host_state.h,
//     KeptCallerSession): the nonceTPM of each one's last verified answer,
//     so a session started by one program (tpm2_startauthsession) is
//     re-signed, and its command's parameters encrypted, in the next;
//   - per program, which of its commands was the last the TCTI's session
//     went on (the TCTI ends its session with that command the next time:
//     wrap.h). Only ever a guess: a program that needs the session later
//     gets a new one, at the cost of its start.
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
