// FileHostState (file_host_state.h): where each record lives, the boot id,
// and the files a user names. The records' formats are in pin_files.cc,
// session_cache_file.cc and provision_files.cc.
#include "tpmsec/host/file_host_state.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "state_file.h"
#include "tpmsec/host/kernel_pin.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

const char* folder(StateRecord what) {
  switch (what) {
    case StateRecord::kNullKeyPin: return "null-key-pins";
    case StateRecord::kEkPin: return "ek-pins";
    case StateRecord::kKeptInfo:
    case StateRecord::kKeptNullKey:
    case StateRecord::kKeptCommandCount: return "session-cache";
    case StateRecord::kBindSecret: return "bind";
    case StateRecord::kSaltKey: return "salt-key";
  }
  return "unknown";
}

// A CA file: its size checked before it is read (file_size), as it names it.
Result<std::string> read_ca_file(const std::filesystem::path& path) {
  std::error_code ec;
  uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return usage_error(fmt::format("cannot read CA file {}: {}", path.string(), ec.message()));
  if (size > crypto::kMaxCaFileBytes) {
    return usage_error(fmt::format("CA file {} is {} bytes, more than a CA bundle should be", path.string(), size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return usage_error(fmt::format("cannot read CA file {}: {}", path.string(), std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::string default_state_dir() {
  if (std::string d = env_or_empty("TPMSEC_STATE_DIR"); !d.empty()) return d;
  if (::geteuid() == 0) return "/var/lib/tpmsec";
  if (std::string x = env_or_empty("XDG_STATE_HOME"); !x.empty()) return x + "/tpmsec";
  if (std::string h = env_or_empty("HOME"); !h.empty()) return h + "/.local/state/tpmsec";
  return "/var/lib/tpmsec";
}

FileHostState::FileHostState(std::string state_dir) : dir_(std::move(state_dir)) {}

Result<std::string> FileHostState::boot_id() {
#ifdef TPMSEC_TEST_HOOKS
  // Test builds only (CMake option TPMSEC_TEST_HOOKS): a release binary must
  // not let its environment fake a reboot.
  if (std::string id = env_or_empty("TPMSEC_BOOT_ID"); !id.empty()) return id;
#endif
  bool missing = false;
  TPMSEC_ASSIGN_OR_RETURN(std::string text, state_file::read("/proc/sys/kernel/random/boot_id", &missing));
  std::string id(trim(text));
  if (missing || id.empty()) return runtime_error("cannot read this host's boot id (/proc/sys/kernel/random/boot_id)");
  return id;
}

std::string FileHostState::where(StateRecord what) const { return fmt::format("{}/{}", dir_, folder(what)); }

std::string FileHostState::where(StateRecord what, const TpmId& tpm, SaltKind kind) const {
  switch (what) {
    case StateRecord::kKeptInfo: return fmt::format("{}/{}-info", where(what), tpm.key);
    case StateRecord::kKeptCommandCount: return fmt::format("{}/{}-commands-*", where(what), tpm.key);
    case StateRecord::kBindSecret:
    case StateRecord::kSaltKey: return fmt::format("{}/{}", where(what), tpm.key);
    default: return fmt::format("{}/{}-{}", where(what), tpm.key, state_file::salt_label(kind));
  }
}

Result<bool> FileHostState::erase(StateRecord what, const TpmId& tpm) {
  if (what == StateRecord::kKeptInfo || what == StateRecord::kBindSecret || what == StateRecord::kSaltKey) {
    return state_file::remove(where(what, tpm));
  }
  if (what == StateRecord::kKeptCommandCount) return erase_command_counts(tpm);
  bool any = false;
  for (SaltKind kind : {SaltKind::kEcc, SaltKind::kRsa}) {
    TPMSEC_ASSIGN_OR_RETURN(bool removed, state_file::remove(where(what, tpm, kind)));
    any = any || removed;
  }
  return any;
}

std::string FileHostState::command_count_file(const TpmId& tpm, const ProgramId& program) const {
  return fmt::format("{}/{}-commands-{}", where(StateRecord::kKeptCommandCount), tpm.key, program.key);
}

Result<bool> FileHostState::erase_command_counts(const TpmId& tpm) {
  namespace fs = std::filesystem;
  const std::string prefix = tpm.key + "-commands-";
  std::vector<std::string> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(where(StateRecord::kKeptCommandCount), ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path().string());
  }
  bool any = false;
  for (const std::string& f : files) {
    TPMSEC_ASSIGN_OR_RETURN(bool removed, state_file::remove(f));
    any = any || removed;
  }
  return any;
}

Result<ProgramId> FileHostState::running_program() const {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return runtime_error("cannot tell which program this is (/proc/self/exe)");
  // A multi-call binary is a program per name it is run by (tpm2-tools:
  // /usr/bin/tpm2 run as tpm2_pcrextend, tpm2_createprimary, ...).
  bool missing = false;
  auto cmdline = state_file::read("/proc/self/cmdline", &missing);
  std::string name;
  if (cmdline.ok() && !missing) name = std::filesystem::path(cmdline->substr(0, cmdline->find('\0'))).filename().string();
  if (name.empty() || name == exe.filename().string()) return ProgramId::of(exe.string());
  return ProgramId::of(fmt::format("{} ({})", exe.string(), name));
}

std::string FileHostState::kernel_null_name_file(std::string_view device_path) const {
  return tpmsec::kernel_null_name_file(device_path);
}

Result<std::string> FileHostState::read_null_name_file(const std::string& path) const {
  std::ifstream in(path);
  if (!in) return usage_error(fmt::format("cannot read null key name from {}: {}", path, std::strerror(errno)));
  std::string line;
  std::getline(in, line);
  return line;
}

Result<std::vector<crypto::PemFile>> FileHostState::read_ca_files(const std::string& file_or_dir) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::file_status status = fs::status(file_or_dir, ec);
  if (ec || !fs::exists(status)) return usage_error(fmt::format("CA bundle {} does not exist", file_or_dir));
  std::vector<fs::path> paths;
  if (fs::is_directory(status)) {
    for (const fs::directory_entry& e : fs::directory_iterator(file_or_dir, ec)) {
      if (!e.is_regular_file(ec)) continue;
      if (paths.size() == crypto::kMaxCaBundleFiles) {
        return usage_error(
            fmt::format("CA directory {} holds more than {} files", file_or_dir, crypto::kMaxCaBundleFiles));
      }
      paths.push_back(e.path());
    }
    if (ec) return usage_error(fmt::format("cannot list CA directory {}: {}", file_or_dir, ec.message()));
    std::sort(paths.begin(), paths.end());  // errors name the same file every run
  } else {
    paths.push_back(file_or_dir);
  }
  std::vector<crypto::PemFile> files;
  for (const fs::path& p : paths) {
    TPMSEC_ASSIGN_OR_RETURN(std::string text, read_ca_file(p));
    files.push_back({p.string(), std::move(text)});
  }
  return files;
}

}  // namespace tpmsec
