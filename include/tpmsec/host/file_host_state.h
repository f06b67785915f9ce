// The host's state on its file system (host_state.h): the one HostState a program on the library gets
// unless it brings its own (protect.h, ProtectRequest::host). The tpmsec_host target.
// The state directory holds one file per record, "key=value" lines, read with a size bound, written whole
// or not at all, 0600 in 0700 directories whatever the umask. Every read, write and removal first checks
// the state directory's parent, each directory from the state directory down and the file itself (owner
// root or the effective uid, nobody else can write, files 0600, no symbolic link followed).
// Errors: anything else is refused, kRuntime naming the path and its owner (files.h); the rest as
// host_state.h says. Each file also holds the TPM string (and the program's path), which must be the one
// asked for. Ownership and threads: as HostState says.
// The records (null-key-pins/, ek-pins/, session-cache/, bind/, salt-key/, held-handles/), their names and
// keys: docs/architecture.md, "The host beside the core", subsection "The state directory
// (include/tpmsec/host/file_host_state.h)".
#ifndef TPMSEC_HOST_FILE_HOST_STATE_H_
#define TPMSEC_HOST_FILE_HOST_STATE_H_

#include <string>

#include "tpmsec/host/files.h"
#include "tpmsec/host_state.h"

namespace tpmsec {

// Where tpmsec keeps what outlives a process: $TPMSEC_STATE_DIR, else
// /var/lib/tpmsec for root, else $XDG_STATE_HOME/tpmsec or
// ~/.local/state/tpmsec.
std::string default_state_dir();

class FileHostState final : public HostState {
 public:
  // State in `state_dir` (created 0700 on the first put). The boot id is
  // /proc/sys/kernel/random/boot_id, or in test builds (CMake option
  // TPMSEC_TEST_HOOKS) $TPMSEC_BOOT_ID when set (tests simulate a reboot
  // with it); release builds ignore it. The kernel's pins are under /sys
  // (kernel_pin.h).
  explicit FileHostState(std::string state_dir = default_state_dir());
  const std::string& dir() const { return dir_; }

  Result<std::string> boot_id() override;
  Result<std::optional<NullKeyPin>> null_key_pin(const TpmId& tpm, SaltKind kind) const override;
  Status put_null_key_pin(const TpmId& tpm, SaltKind kind, const NullKeyPin& pin) override;
  Result<std::optional<EkPinRecord>> ek_pin(const TpmId& tpm, SaltKind kind) const override;
  Status put_ek_pin(const TpmId& tpm, SaltKind kind, const EkPinRecord& record) override;
  Result<std::optional<TpmInfo>> kept_info(const TpmId& tpm, const std::string& boot) const override;
  Status put_kept_info(const TpmId& tpm, const std::string& boot, const TpmInfo& info) override;
  Result<std::optional<NullKey::Snapshot>> kept_null_key(const TpmId& tpm, const std::string& boot,
                                                         SaltKind kind) const override;
  Status put_kept_null_key(const TpmId& tpm, const std::string& boot, const NullKey::Snapshot& key) override;
  Result<std::optional<uint64_t>> kept_command_count(const TpmId& tpm, const std::string& boot,
                                                     const ProgramId& program) const override;
  Status put_kept_command_count(const TpmId& tpm, const std::string& boot, const ProgramId& program,
                                uint64_t count) override;
  Result<std::optional<KeptCallerSession>> kept_caller_session(const TpmId& tpm, const std::string& boot,
                                                               uint32_t handle) const override;
  Status put_kept_caller_session(const TpmId& tpm, const std::string& boot, const KeptCallerSession& session) override;
  Status erase_kept_caller_session(const TpmId& tpm, uint32_t handle) override;
  Result<ProgramId> running_program() const override;
  std::vector<HeldHandlesRecord> held_handles(const TpmId& tpm) const override;
  Status put_held_handles(const TpmId& tpm, const HeldHandlesRecord& record) override;
  Result<ProcessStamp> this_process() const override;
  bool process_runs(const ProcessStamp& process) const override;
  Result<std::optional<BindSecret>> bind_secret(const TpmId& tpm) const override;
  Status put_bind_secret(const TpmId& tpm, const BindSecret& secret) override;
  Result<std::optional<PersistentSaltKey>> salt_key(const TpmId& tpm) const override;
  Status put_salt_key(const TpmId& tpm, const PersistentSaltKey& key) override;
  Result<bool> erase(StateRecord what, const TpmId& tpm) override;
  std::string where(StateRecord what) const override;
  std::string where(StateRecord what, const TpmId& tpm, SaltKind kind = SaltKind::kEcc) const override;
  std::string kernel_null_name_file(std::string_view device_path) const override;
  Result<std::string> read_null_name_file(const std::string& path) const override;
  Result<std::vector<crypto::PemFile>> read_ca_files(const std::string& file_or_dir) const override;

 private:
  // Where a record is, as the state root and the path under it.
  files::StatePath at(StateRecord what, const TpmId& tpm, SaltKind kind = SaltKind::kEcc) const;
  files::StatePath command_count_file(const TpmId& tpm, const ProgramId& program) const;
  files::StatePath caller_session_file(const TpmId& tpm, uint32_t handle) const;
  // Removes every file of the folder of `what` whose name starts `prefix`.
  Result<bool> erase_prefixed(StateRecord what, const std::string& prefix);
  files::StatePath held_handles_file(const TpmId& tpm, const HeldHandlesRecord& record) const;

  std::string dir_;
};

}  // namespace tpmsec

#endif  // TPMSEC_HOST_FILE_HOST_STATE_H_
