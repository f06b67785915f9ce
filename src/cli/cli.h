// Shared plumbing of the tpmsec command line: how subcommands register, how
// they open the TPM, and how errors become one stderr line and an exit code.
#ifndef TPMSEC_SRC_CLI_CLI_H_
#define TPMSEC_SRC_CLI_CLI_H_

#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tpmsec/measure/measured_tpm.h"
#include "tpmsec/policy/policy.h"
#include "tpmsec/protect.h"
#include "tpmsec/result.h"
#include "tpmsec/session_cache.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/tpm.h"
#include "tpmsec/tpm_config.h"
#include "tpmsec/tpm_info.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec::cli {

// Exit codes (documented in README and --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitIntegrity = 3;

int exit_code_for(const Error& e);
// What the user can do about a library error of this reason, in the CLI's
// options (". Give --ek-ca ..."); empty when the message says it all.
std::string_view advice_for(ErrorReason reason);

// A malformed file the user gave is unusable input (exit 2), not a runtime
// failure: library parsers say kParse, which from a TPM response means exit 1.
Error input_file_error(const Error& e);
template <typename T>
Result<T> as_input(Result<T> r) {
  if (r.ok()) return r;
  return input_file_error(r.error());
}

// The action a parsed subcommand runs.
using Action = std::function<Status()>;

// Each subcommand file registers itself: adds its CLI11 subcommand to `app`
// and sets `*action` in the subcommand's callback.
void register_info(CLI::App& app, Action* action);
void register_pcr(CLI::App& app, Action* action);
void register_random(CLI::App& app, Action* action);
void register_null_key(CLI::App& app, Action* action);
void register_bench(CLI::App& app, Action* action);
void register_profiles(CLI::App& app, Action* action);
void register_profile(CLI::App& app, Action* action);
void register_policy(CLI::App& app, Action* action);
void register_replay(CLI::App& app, Action* action);
void register_verify(CLI::App& app, Action* action);
void register_predict(CLI::App& app, Action* action);
void register_trace(CLI::App& app, Action* action);
void register_compare(CLI::App& app, Action* action);
void register_provision(CLI::App& app, Action* action);
void register_emulate(CLI::App& app, Action* action);
void register_serve(CLI::App& app, Action* action);

// A note that holds only once the command ran (the embedded simulator stood
// in for a TPM nobody named): main() prints it after the command succeeded,
// never before a failure that ran nothing. Given twice, printed once.
void note_on_success(std::string line);
void print_success_notes();

// --tpm and --emulate on a subcommand: the TPM string and an optional
// latency profile to emulate.
// The protection items of a TPM string (tpm_config.h) a command applies,
// declared in this one struct by each command: an item it applies counts as
// the flag of its name (one rule where both are given: flag_or_item(),
// protection_options.h); one it does not is named on stderr, never dropped.
struct AppliedItems {
  // null-name=, ek-ca=, tofu, salt=: the command takes the protection
  // options (ProtectionOptions::add_to sets it).
  bool protection = false;
  // policy=: the command follows a policy (--policy, $TPMSEC_POLICY).
  bool policy = false;
};

// The TPM a command uses, resolved once (TpmOption::resolved()).
struct ResolvedTpm {
  ChosenTpm chosen;  // the TPM and its items, as given or as the host's is chosen
  std::string tpm;   // the TPM string the command opens (tpm_string())
  TpmSpec spec;      // what `tpm` names
};

struct TpmOption {
  std::string spec;  // --tpm, items and all; empty: the default (chosen_tpm())
  std::string emulate;
  bool changes_state = false;  // the command changes TPM state (PCRs, NV, persistent keys)
  AppliedItems applies;
  // `state_changing`: when the embedded simulator stands in for a TPM nobody
  // named, the command says so on stderr (tpm_string()).
  void add_to(CLI::App* sub, bool state_changing = false);
  // The TPM this command uses, resolved at the first call and the same at
  // every later one: --tpm, else the host's TPM as tpm2-tools picks it
  // (tpm_config.h, chosen_tpm()), its protection items split off and its
  // TPM string parsed once; with --emulate, /dev/tpmrm0 is not picked: the
  // embedded TPM plays the profile's chip unless the environment names
  // another. The protection items this command does not apply are named on
  // stderr then, once.
  const Result<ResolvedTpm>& resolved() const;
  // resolved()'s TPM string.
  Result<std::string> tpm_string() const;
  // resolved()'s TPM and items (tpm_config.h) — of --tpm, $TPMSEC_TPM or
  // $TPM2TOOLS_TCTI=tpmsec:… alike, one grammar.
  Result<ChosenTpm> chosen() const;

 private:
  Result<ResolvedTpm> resolve() const;
  mutable std::optional<Result<ResolvedTpm>> resolved_;
  // chosen_tpm(), except that with --emulate a $TPM2TOOLS_TCTI tpmsec does
  // not speak (tabrmd, set for tpm2-tools host-wide) leaves the embedded TPM
  // playing the chip, with a note, instead of a usage error: an emulation
  // needs no TPM of the host.
  Result<ChosenTpm> chosen_default() const;
};

// The protect path over the measured stack: open_transport() opens the TPM
// the command resolved, a MeasuredTransport (tpmsec/measure/measured_transport.h)
// traces it, behind the profile's latency model on a virtual clock with
// --emulate, and ProtectedTpm::open (protect.h), the one way in, is handed
// that transport (with the profile's facts when emulating). `measured` reads
// what the ProtectedTpm sends, as measured.
struct MeasuredProtectedTpm {
  std::unique_ptr<ProtectedTpm> protect;  // owns the measured transport and the Tpm
  std::unique_ptr<MeasuredTpm> measured;  // a view of protect's (measured_view())
};
Result<MeasuredProtectedTpm> open_measured_protected(const TpmOption& option, ProtectRequest request);

// An open TPM. Protected (open_protected): the protect path's one way in,
// ProtectedTpm::open (protect.h), which opens the TPM, keeps what earlier
// runs kept and resolves the anchor, nothing of the measurement layer
// (open_plain.cc, checked by scripts/check-layers); with --emulate, over the
// measured stack (open_measured_protected). Measured (open_tpm): a
// MeasuredTpm over the transport, traced, behind the profile's latency model
// on a virtual clock when emulating. When it closes under emulation it
// reports on stderr how many TPM commands ran and how long they took on the
// model.
struct OpenTpm {
  // The protect path over this TPM (open_protected): the request resolved
  // for it; it keeps what earlier runs kept when the request says `keep`.
  std::unique_ptr<ProtectedTpm> protect;
  // Set only when measuring: a view of protect's TPM, or (open_tpm) its own.
  std::unique_ptr<MeasuredTpm> measured;
  // When emulating, also list every command with its modelled time (-v).
  bool list_commands = false;
  // TPM time of every command run so far, on the virtual clock when emulating
  // (0 on the plain path: nothing is traced).
  double emulated_ms() const;

  Tpm& tpm() const { return measured ? *measured->tpm : protect->tpm(); }
  const TpmInfo& info() const { return measured ? measured->info : protect->info(); }
  // The transport the TPM string named (describe()).
  Transport& transport() const { return measured ? *measured->base : protect->transport(); }
  // The virtual clock when emulating, else the steady clock.
  const Clock* clock() const;
  // The emulated profile's id; empty unless emulating.
  const std::string& profile() const;

  OpenTpm();
  OpenTpm(OpenTpm&&) noexcept;
  OpenTpm& operator=(OpenTpm&&) noexcept;
  ~OpenTpm();
};
// The TPM `option` names opened on the protect path for `request`
// (ProtectionOptions::request(): the flags and the TPM string's items):
// open_plain_protected(), or with --emulate open_measured_protected().
// request.keep: use and update what earlier processes kept for this TPM
// (session_cache.h).
Result<OpenTpm> open_protected(const TpmOption& option, ProtectRequest request);
// The plain path of open_protected (open_plain.cc): `option.emulate` must be empty.
Result<std::unique_ptr<ProtectedTpm>> open_plain_protected(const TpmOption& option, ProtectRequest request);
// The TPM measured (info: the identity JSON), --emulate or not; no protection.
Result<OpenTpm> open_tpm(const TpmOption& option);

// A TPM opened for measurement (see measured_tpm.h); prints the profile's
// provenance warning when emulating.
Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const TpmOption& option);

// Writes `content` to an output path by files::write_output()
// (include/tpmsec/host/files.h): "-" is standard output; a device or FIFO is
// written through; a regular file is replaced through a temporary file and a
// rename, so an interrupted run never leaves a half-written file; a symlink
// is followed only in a directory nobody but root and the caller can write.
// Every write and close is checked: a failure is one runtime error naming
// the path.
Status write_file(const std::string& path, const std::string& content);
// Checks output paths before any work (files::plan_output): each writable
// (an existing file, or a new one in an existing writable directory), none
// refused by the symlink rule, and no two the same file (or both "-"); empty
// paths are skipped. Usage errors name the path.
Status check_outputs(const std::vector<std::string>& paths);
// Where a command's human-readable report goes: standard error when one of
// its outputs is "-" (standard output then carries only that output), else
// standard output.
std::FILE* report_stream(const std::vector<std::string>& outputs);
// The whole of a regular file of at most `max_bytes`; kUsage errors name it.
Result<std::string> read_file(const std::string& path, size_t max_bytes);
// A JSON document (a bench result) of at most 256 MiB; kUsage errors name it.
Result<nlohmann::json> read_json_file(const std::string& path);
// Warns on stderr when a bench result read from `path` says it was
// interrupted: what it holds is partial.
void warn_if_interrupted(const nlohmann::json& bench, const std::string& path);
// Measurement logs and captures can be large, not unbounded.
inline constexpr size_t kMaxLogBytes = size_t{1} << 30;

// Parses a decimal PCR index ("16"); kUsage error otherwise.
Result<uint32_t> parse_pcr_index(const std::string& text);
// Parses a list of PCR indexes 0-31 and ranges ("0-7,10,14"); kUsage error
// otherwise.
Result<std::set<uint32_t>> parse_pcr_list(const std::string& text);
// Parses a bank name ("sha256"); kUsage error otherwise.
Result<uint16_t> parse_bank(const std::string& text);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_CLI_H_
