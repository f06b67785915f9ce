// What tpmsec keeps on, and reads from, the host it runs on: the one typed store of host state, keyed by
// TPM (tpm_id.h), as LevelDB's Env is the one way its core reaches the operating system. The core (wire,
// crypto, sessions, strategies) does no file system, /proc or /sys access of its own: what it needs of the
// host it is handed through a HostState, which the protect layer makes (protect.h: ProtectRequest::host).
// Implementations: FileHostState (file_host_state.h, the tpmsec_host target: the state directory, /proc's
// boot id, /sys's null_name pins); MemoryHostState (testing/memory_host_state.h: tests with no state
// directory).
// Ownership: shared (std::shared_ptr, ProtectRequest::host) by whoever the protect layer hands it to.
// Records are kept per TPM string. Not thread-safe unless an implementation says so.
// Errors: a record that cannot be read back as written is kParse, naming where it is and how to remove it
// (a pin or a secret is never silently dropped); the kept session cache is the exception: only ever a
// cache, a bad one reads as none. A record the store may not trust (FileHostState: a file or directory
// another user owns or can write, a symbolic link: files.h) is kRuntime, for every record the cache's
// included: it is never read as none.
// Why, and what it holds: docs/architecture.md, "The host beside the core".
#ifndef TPMSEC_HOST_STATE_H_
#define TPMSEC_HOST_STATE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/bind_secret.h"
#include "tpmsec/bytes.h"
#include "tpmsec/ek_certificate.h"
#include "tpmsec/ek_pin.h"
#include "tpmsec/handle_ledger.h"
#include "tpmsec/null_key.h"
#include "tpmsec/result.h"
#include "tpmsec/salt_key.h"
#include "tpmsec/tpm_id.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {

// Trust on first use of the null key (--tofu), kept per TPM, salt kind and
// host boot.
//
// The null key's name is a function of the TPM's null seed, which every TPM
// Reset (every host boot) regenerates. A pin therefore holds for one boot of
// this host: it is stored with the host's boot id (HostState::boot_id()). A
// pin of an earlier boot is stale: the next first use replaces it.
//
// What it rests on (docs/threat-model.md): the first use of each boot being
// clean. An interposer present at that first use wins until the pin is
// forgotten; one that arrives later is caught (the name differs: exit 3).
// Nothing from the TPM is used to decide which boot it is: a forged "new
// boot" could otherwise make tpmsec take a new pin.
struct NullKeyPin {
  Bytes name;
  std::string boot_id;
};

// A session a program started unsalted and unbound (so its HMAC key is the
// authValue alone) and that a wrapper re-signs (wrap.h): its handle, its
// authHash, and the nonceTPM of its last answer whose HMAC the wrapper
// verified. Nothing secret: every field crossed the bus. Kept so that the
// program's next process (tpm2_startauthsession, then tpm2_unseal -p
// session:FILE) finds it; a record that is stale or altered only makes the
// program's HMAC fail to verify, and the wrapper then re-signs nothing.
struct KeptCallerSession {
  uint32_t handle = 0;
  uint16_t auth_hash = 0;
  Bytes nonce_tpm;
};

// A process, told apart from every other that had or will have its pid: its
// start time (/proc/PID/stat field 22, clock ticks after boot: a pid reused
// later starts later) and its pid namespace (/proc/self/ns/pid's inode: the
// same pid in another namespace is another process).
struct ProcessStamp {
  int64_t pid = 0;
  uint64_t start = 0;
  uint64_t pid_namespace = 0;
  bool operator==(const ProcessStamp&) const = default;
};

// What one Tpm of a front end (the TCTI) holds on a TPM that does not flush a
// closed connection's handles, kept while its process runs, so that the next
// process can flush what it left when it died (held_handles.h).
struct HeldHandlesRecord {
  ProcessStamp owner;
  uint64_t context = 0;  // which of the owner's Tpms (one record each)
  std::string boot;      // the host's boot id when it was written
  std::vector<HeldHandle> handles;
};

// The kinds of record, for erase() and where().
enum class StateRecord {
  kNullKeyPin,         // NullKeyPin, per salt kind
  kEkPin,              // EkPinRecord (ek_pin.h), per salt kind
  kKeptInfo,           // the kept capabilities (session_cache.h)
  kKeptNullKey,        // the kept null key (session_cache.h), per salt kind
  kBindSecret,         // BindSecret (bind_secret.h)
  kSaltKey,            // PersistentSaltKey (salt_key.h)
  kKeptCommandCount,   // the kept command count of a program (session_cache.h), per program
  kKeptCallerSession,  // a program's re-signable session (session_cache.h), per session handle
  kHeldHandles,        // HeldHandlesRecord, per process and Tpm
};

class HostState {
 public:
  virtual ~HostState();

  // This host's boot id (the kernel's /proc/sys/kernel/random/boot_id):
  // what ties a record to one boot of the host (a TPM Reset).
  virtual Result<std::string> boot_id() = 0;

  // --tofu pins. none when there is none.
  virtual Result<std::optional<NullKeyPin>> null_key_pin(const TpmId& tpm, SaltKind kind) const = 0;
  // Keeps `pin` whole or not at all.
  virtual Status put_null_key_pin(const TpmId& tpm, SaltKind kind, const NullKeyPin& pin) = 0;

  // --ek-ca's pins of the EK (ek_pin.h).
  virtual Result<std::optional<EkPinRecord>> ek_pin(const TpmId& tpm, SaltKind kind) const = 0;
  virtual Status put_ek_pin(const TpmId& tpm, SaltKind kind, const EkPinRecord& record) = 0;

  // What one-shot commands keep for the next process (session_cache.h), of
  // `boot` only: none when nothing is kept, it is of another boot, or it
  // does not read back; an error when it may not be trusted (above).
  virtual Result<std::optional<TpmInfo>> kept_info(const TpmId& tpm, const std::string& boot) const = 0;
  virtual Status put_kept_info(const TpmId& tpm, const std::string& boot, const TpmInfo& info) = 0;
  virtual Result<std::optional<NullKey::Snapshot>> kept_null_key(const TpmId& tpm, const std::string& boot,
                                                                 SaltKind kind) const = 0;
  virtual Status put_kept_null_key(const TpmId& tpm, const std::string& boot, const NullKey::Snapshot& key) = 0;
  // The command count a front end that protects another program's commands
  // (the TCTI) kept for `program` on `tpm` the last time it ran in `boot`
  // (session_cache.h); none when not kept.
  virtual Result<std::optional<uint64_t>> kept_command_count(const TpmId& tpm, const std::string& boot,
                                                             const ProgramId& program) const = 0;
  virtual Status put_kept_command_count(const TpmId& tpm, const std::string& boot, const ProgramId& program,
                                        uint64_t count) = 0;
  // A program's session that a wrapper re-signs (session_cache.h,
  // KeptCallerSession), by handle, of `boot` only: none when not kept, of
  // another boot, or not readable; an error when it may not be trusted
  // (above). Erased when the session ended.
  virtual Result<std::optional<KeptCallerSession>> kept_caller_session(const TpmId& tpm, const std::string& boot,
                                                                       uint32_t handle) const = 0;
  virtual Status put_kept_caller_session(const TpmId& tpm, const std::string& boot,
                                         const KeptCallerSession& session) = 0;
  virtual Status erase_kept_caller_session(const TpmId& tpm, uint32_t handle) = 0;
  // The program this process runs (its executable, /proc/self/exe, and the
  // name it was run by when that is another: a multi-call binary's): what a
  // record per program is kept under. kRuntime when it cannot be told.
  virtual Result<ProgramId> running_program() const = 0;

  // The handles front ends' Tpms hold on `tpm` (held_handles.h), every
  // record of every boot. A record that does not read back as written is
  // left out: it can never be a reason to flush.
  virtual std::vector<HeldHandlesRecord> held_handles(const TpmId& tpm) const = 0;
  // Keeps `record` in place of its owner's record of the same context, or
  // removes that one when `record` holds no handle. Written for the host's
  // current boot only (it is not synced: a crash of the host ends the boot
  // it is about).
  virtual Status put_held_handles(const TpmId& tpm, const HeldHandlesRecord& record) = 0;
  // This process. kRuntime when it cannot be told.
  virtual Result<ProcessStamp> this_process() const = 0;
  // False only when `process` is known to have ended: no process with its
  // pid, another one (started at another time), or it is a zombie. One of
  // another pid namespace cannot be told, and counts as running.
  virtual bool process_runs(const ProcessStamp& process) const = 0;

  // What `tpmsec provision` kept (bind_secret.h, salt_key.h).
  virtual Result<std::optional<BindSecret>> bind_secret(const TpmId& tpm) const = 0;
  virtual Status put_bind_secret(const TpmId& tpm, const BindSecret& secret) = 0;
  virtual Result<std::optional<PersistentSaltKey>> salt_key(const TpmId& tpm) const = 0;
  virtual Status put_salt_key(const TpmId& tpm, const PersistentSaltKey& key) = 0;

  // Removes the records `what` of `tpm` (of every salt kind). True when one
  // existed.
  virtual Result<bool> erase(StateRecord what, const TpmId& tpm) = 0;
  // Where records of `what` are kept (a directory), and where the one of
  // `tpm` (and `kind`, for a kind kept per salt kind) is: for what a person
  // reads.
  virtual std::string where(StateRecord what) const = 0;
  virtual std::string where(StateRecord what, const TpmId& tpm, SaltKind kind = SaltKind::kEcc) const = 0;

  // The file in which the kernel exports its pin of the null key of the TPM
  // behind `device_path` (kernel_pin.h); empty when it exports none.
  virtual std::string kernel_null_name_file(std::string_view device_path) const = 0;
  // A file the user named (a null key's name in the kernel's format): its
  // first line. kUsage "cannot read null key name from PATH" when it cannot
  // be read.
  virtual Result<std::string> read_null_name_file(const std::string& path) const = 0;
  // The PEM files of a CA bundle (ek_certificate.h): the file, or each
  // regular file of the directory in name order. kUsage naming the bundle
  // or file when it does not exist or cannot be read.
  virtual Result<std::vector<crypto::PemFile>> read_ca_files(const std::string& file_or_dir) const = 0;
};

// A null key's name given as hex (68 digits for SHA-256), or as the path of a
// file holding it in the kernel's sysfs format (read through `host`).
Result<Bytes> parse_null_name(const std::string& hex_or_path, const HostState& host);

// The CA bundle `file_or_dir` (a PEM file or a directory of them), read
// through `host` (crypto::CaBundle::from_pem_files).
Result<crypto::CaBundle> load_ca_bundle(const std::string& file_or_dir, const HostState& host);

// The vendor roots `tpmsec serve` stands on (protect.h, StandingAnchor): the
// *.pem files of directory `roots` (data/ek-roots/: its SOURCES.tsv and
// README are not certificates), with the intermediates the administrator
// cached in `intermediates` (ek_certificate.h, CaBundle::add_intermediates;
// none when empty), read through `host`.
Result<crypto::CaBundle> load_ek_roots(const std::string& roots, const std::string& intermediates,
                                       const HostState& host);

}  // namespace tpmsec

#endif  // TPMSEC_HOST_STATE_H_
