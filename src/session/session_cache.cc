#include "tpmsec/session_cache.h"

namespace tpmsec {

SessionCache::SessionCache(std::shared_ptr<HostState> host, TpmId tpm, std::string boot_id)
    : host_(std::move(host)), tpm_(std::move(tpm)), boot_(std::move(boot_id)) {}

Result<std::optional<TpmInfo>> SessionCache::info() const { return host_->kept_info(tpm_, boot_); }

Result<std::optional<NullKey::Snapshot>> SessionCache::null_key(SaltKind kind) const {
  return host_->kept_null_key(tpm_, boot_, kind);
}

Status SessionCache::put_info(const TpmInfo& info) { return host_->put_kept_info(tpm_, boot_, info); }

Status SessionCache::put_null_key(const NullKey::Snapshot& key) { return host_->put_kept_null_key(tpm_, boot_, key); }

Result<std::optional<uint64_t>> SessionCache::command_count(const ProgramId& program) const {
  return host_->kept_command_count(tpm_, boot_, program);
}

Status SessionCache::put_command_count(const ProgramId& program, uint64_t count) {
  return host_->put_kept_command_count(tpm_, boot_, program, count);
}

Result<std::optional<KeptCallerSession>> SessionCache::caller_session(uint32_t handle) const {
  return host_->kept_caller_session(tpm_, boot_, handle);
}

Status SessionCache::put_caller_session(const KeptCallerSession& session) {
  return host_->put_kept_caller_session(tpm_, boot_, session);
}

Status SessionCache::drop_caller_session(uint32_t handle) { return host_->erase_kept_caller_session(tpm_, handle); }

Status SessionCache::drop_info() { return status_of(host_->erase(StateRecord::kKeptInfo, tpm_)); }

Result<std::optional<TpmInfo>> kept_info_of(const std::optional<SessionCache>& cache) {
  if (!cache) return std::optional<TpmInfo>();
  return cache->info();
}

Result<bool> SessionCache::forget() {
  TPMSEC_ASSIGN_OR_RETURN(bool info, host_->erase(StateRecord::kKeptInfo, tpm_));
  TPMSEC_ASSIGN_OR_RETURN(bool keys, host_->erase(StateRecord::kKeptNullKey, tpm_));
  TPMSEC_ASSIGN_OR_RETURN(bool counts, host_->erase(StateRecord::kKeptCommandCount, tpm_));
  TPMSEC_ASSIGN_OR_RETURN(bool sessions, host_->erase(StateRecord::kKeptCallerSession, tpm_));
  return info || keys || counts || sessions;
}

}  // namespace tpmsec
