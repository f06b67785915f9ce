// Host state in memory (host_state.h), for tests of the core that need no
// state directory, no /proc and no /sys (library tpmsec_test_doubles, never
// installed). Records are kept as given, typed; "files" the user names (a
// null-name file, a CA bundle) are what add_file() put there; the boot id
// and the kernel's pins are what the test sets.
#ifndef TPMSEC_TESTING_MEMORY_HOST_STATE_H_
#define TPMSEC_TESTING_MEMORY_HOST_STATE_H_

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tpmsec/host_state.h"

namespace tpmsec::testing {

class MemoryHostState final : public HostState {
 public:
  explicit MemoryHostState(std::string boot_id = "boot-1") : boot_(std::move(boot_id)) {}

  // A reboot of the host: later records are of `boot_id`.
  void set_boot_id(std::string boot_id) { boot_ = std::move(boot_id); }
  // The kernel exports its pin of the TPM behind `device_path` in `file`
  // (add_file() gives it its content).
  void set_kernel_pin(std::string device_path, std::string file) { kernel_[std::move(device_path)] = std::move(file); }
  // A file the user may name (in a directory: name it "DIR/FILE").
  void add_file(std::string path, std::string text) { files_[std::move(path)] = std::move(text); }

  Result<std::string> boot_id() override { return boot_; }

  // The records, kept as given: no format, so nothing to refuse.
  Result<std::optional<NullKeyPin>> null_key_pin(const TpmId& tpm, SaltKind kind) const override {
    return find(null_key_pins_, Key{tpm.key, kind});
  }
  Status put_null_key_pin(const TpmId& tpm, SaltKind kind, const NullKeyPin& pin) override {
    null_key_pins_[{tpm.key, kind}] = pin;
    return ok_status();
  }
  Result<std::optional<EkPinRecord>> ek_pin(const TpmId& tpm, SaltKind kind) const override {
    return find(ek_pins_, Key{tpm.key, kind});
  }
  Status put_ek_pin(const TpmId& tpm, SaltKind kind, const EkPinRecord& record) override {
    ek_pins_[{tpm.key, kind}] = record;
    return ok_status();
  }
  Result<std::optional<TpmInfo>> kept_info(const TpmId& tpm, const std::string& boot) const override {
    return of_boot(find(kept_info_, tpm.key), boot);
  }
  Status put_kept_info(const TpmId& tpm, const std::string& boot, const TpmInfo& info) override {
    kept_info_[tpm.key] = {boot, info};
    return ok_status();
  }
  Result<std::optional<NullKey::Snapshot>> kept_null_key(const TpmId& tpm, const std::string& boot,
                                                         SaltKind kind) const override {
    return of_boot(find(kept_null_keys_, Key{tpm.key, kind}), boot);
  }
  Status put_kept_null_key(const TpmId& tpm, const std::string& boot, const NullKey::Snapshot& key) override {
    kept_null_keys_[{tpm.key, key.kind}] = {boot, key};
    return ok_status();
  }
  Result<std::optional<uint64_t>> kept_command_count(const TpmId& tpm, const std::string& boot,
                                                     const ProgramId& program) const override {
    return of_boot(find(kept_command_counts_, std::pair(tpm.key, program.key)), boot);
  }
  Status put_kept_command_count(const TpmId& tpm, const std::string& boot, const ProgramId& program,
                                uint64_t count) override {
    kept_command_counts_[{tpm.key, program.key}] = {boot, count};
    return ok_status();
  }
  // The program this process runs, as the test says (default "/usr/bin/test-program").
  void set_running_program(std::string path) { program_ = std::move(path); }
  Result<ProgramId> running_program() const override { return ProgramId::of(program_); }
  std::vector<HeldHandlesRecord> held_handles(const TpmId& tpm) const override;
  Status put_held_handles(const TpmId& tpm, const HeldHandlesRecord& record) override;
  // This process, and which processes run, as the test says (by default
  // this one, {1000, 1, 1}, runs and no other).
  void set_this_process(ProcessStamp p) { this_ = p; }
  void set_running(ProcessStamp p, bool runs);
  Result<ProcessStamp> this_process() const override { return this_; }
  bool process_runs(const ProcessStamp& process) const override;
  Result<std::optional<BindSecret>> bind_secret(const TpmId& tpm) const override;
  Status put_bind_secret(const TpmId& tpm, const BindSecret& secret) override;
  Result<std::optional<PersistentSaltKey>> salt_key(const TpmId& tpm) const override {
    return find(salt_keys_, tpm.key);
  }
  Status put_salt_key(const TpmId& tpm, const PersistentSaltKey& key) override {
    salt_keys_[tpm.key] = key;
    return ok_status();
  }

  Result<std::optional<KeptCallerSession>> kept_caller_session(const TpmId& tpm, const std::string& boot,
                                                               uint32_t handle) const override {
    return of_boot(find(kept_caller_sessions_, std::pair(tpm.key, handle)), boot);
  }
  Status put_kept_caller_session(const TpmId& tpm, const std::string& boot, const KeptCallerSession& session) override {
    kept_caller_sessions_[{tpm.key, session.handle}] = {boot, session};
    return ok_status();
  }
  Status erase_kept_caller_session(const TpmId& tpm, uint32_t handle) override {
    kept_caller_sessions_.erase({tpm.key, handle});
    return ok_status();
  }
  Result<bool> erase(StateRecord what, const TpmId& tpm) override;
  // "memory:record-N[/KEY-SALT]": nothing a person could open.
  std::string where(StateRecord what) const override;
  std::string where(StateRecord what, const TpmId& tpm, SaltKind kind = SaltKind::kEcc) const override;
  std::string kernel_null_name_file(std::string_view device_path) const override {
    return find(kernel_, std::string(device_path)).value_or("");
  }
  Result<std::string> read_null_name_file(const std::string& path) const override;
  Result<std::vector<crypto::PemFile>> read_ca_files(const std::string& file_or_dir) const override;

 private:
  using Key = std::tuple<std::string, SaltKind>;  // TpmId::key, salt kind
  template <typename T>
  struct PerBoot {
    std::string boot;
    T value;
  };
  template <typename Map, typename K>
  static std::optional<typename Map::mapped_type> find(const Map& map, const K& key) {
    auto it = map.find(key);
    if (it == map.end()) return std::nullopt;
    return it->second;
  }
  template <typename T>
  static std::optional<T> of_boot(const std::optional<PerBoot<T>>& kept, const std::string& boot) {
    if (!kept || kept->boot != boot) return std::nullopt;
    return kept->value;
  }

  std::string boot_;
  std::map<std::string, std::string> kernel_;
  std::map<std::string, std::string> files_;
  std::map<Key, NullKeyPin> null_key_pins_;
  std::map<Key, EkPinRecord> ek_pins_;
  std::map<std::string, PerBoot<TpmInfo>> kept_info_;
  std::map<Key, PerBoot<NullKey::Snapshot>> kept_null_keys_;
  std::map<std::pair<std::string, std::string>, PerBoot<uint64_t>> kept_command_counts_;         // TPM key, program key
  std::map<std::pair<std::string, uint32_t>, PerBoot<KeptCallerSession>> kept_caller_sessions_;  // TPM key, handle
  std::string program_ = "/usr/bin/test-program";
  // TpmId::key, owner pid, owner start, context: one record each.
  std::map<std::tuple<std::string, int64_t, uint64_t, uint64_t>, HeldHandlesRecord> held_;
  ProcessStamp this_{1000, 1, 1};
  std::vector<ProcessStamp> running_{ProcessStamp{1000, 1, 1}};
  std::map<std::string, BindSecret> bind_secrets_;
  std::map<std::string, PersistentSaltKey> salt_keys_;
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTING_MEMORY_HOST_STATE_H_
