// FileHostState (file_host_state.h): where each record lives, the boot id,
// and the files a user names. The records' formats are in pin_files.cc,
// session_cache_file.cc and provision_files.cc.
#include "tpmsec/host/file_host_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "file_replace.h"
#include "state_file.h"
#include "tpmsec/host/kernel_pin.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
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

// A file of the kernel's (/proc): its text, empty when it cannot be read.
// Not state: the kernel's own, so not held to the state directory's rule.
std::string read_kernel_file(const char* path) {
  files::internal::Fd fd(::open(path, O_RDONLY | O_CLOEXEC));
  std::string text;
  if (fd.get() < 0 || files::internal::read_all(fd.get(), state_file::kMaxBytes, &text) != 0) return "";
  return text;
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
  std::string id(trim(read_kernel_file("/proc/sys/kernel/random/boot_id")));
  if (id.empty()) return runtime_error("cannot read this host's boot id (/proc/sys/kernel/random/boot_id)");
  return id;
}

files::StatePath FileHostState::at(StateRecord what, const TpmId& tpm, SaltKind kind) const {
  const char* f = state_file::folder(what);
  switch (what) {
    case StateRecord::kKeptInfo:
      return {dir_, fmt::format("{}/{}-info", f, tpm.key)};
    case StateRecord::kKeptCommandCount:
      return {dir_, fmt::format("{}/{}-commands-*", f, tpm.key)};
    case StateRecord::kKeptCallerSession:
      return {dir_, fmt::format("{}/{}-session-*", f, tpm.key)};
    case StateRecord::kHeldHandles:
      return {dir_, fmt::format("{}/{}-*", f, tpm.key)};
    case StateRecord::kBindSecret:
    case StateRecord::kSaltKey:
      return {dir_, fmt::format("{}/{}", f, tpm.key)};
    default:
      return {dir_, fmt::format("{}/{}-{}", f, tpm.key, state_file::salt_label(kind))};
  }
}

std::string FileHostState::where(StateRecord what) const {
  return files::StatePath{dir_, state_file::folder(what)}.full();
}

std::string FileHostState::where(StateRecord what, const TpmId& tpm, SaltKind kind) const {
  return at(what, tpm, kind).full();
}

Result<bool> FileHostState::erase(StateRecord what, const TpmId& tpm) {
  if (what == StateRecord::kKeptInfo || what == StateRecord::kBindSecret || what == StateRecord::kSaltKey) {
    return files::remove_private(at(what, tpm));
  }
  if (what == StateRecord::kKeptCommandCount) return erase_prefixed(what, tpm.key + "-commands-");
  if (what == StateRecord::kKeptCallerSession) return erase_prefixed(what, tpm.key + "-session-");
  if (what == StateRecord::kHeldHandles) return erase_prefixed(what, tpm.key + "-");
  bool any = false;
  for (SaltKind kind : {SaltKind::kEcc, SaltKind::kRsa}) {
    TPMSEC_ASSIGN_OR_RETURN(bool removed, files::remove_private(at(what, tpm, kind)));
    any = any || removed;
  }
  return any;
}

files::StatePath FileHostState::command_count_file(const TpmId& tpm, const ProgramId& program) const {
  return {dir_,
          fmt::format("{}/{}-commands-{}", state_file::folder(StateRecord::kKeptCommandCount), tpm.key, program.key)};
}

files::StatePath FileHostState::caller_session_file(const TpmId& tpm, uint32_t handle) const {
  return {dir_,
          fmt::format("{}/{}-session-{:08x}", state_file::folder(StateRecord::kKeptCallerSession), tpm.key, handle)};
}

Result<bool> FileHostState::erase_prefixed(StateRecord what, const std::string& prefix) {
  const files::StatePath dir{dir_, state_file::folder(what)};
  TPMSEC_ASSIGN_OR_RETURN(std::vector<std::string> names, files::list_private(dir));
  bool any = false;
  for (const std::string& name : names) {
    if (name.rfind(prefix, 0) != 0) continue;
    TPMSEC_ASSIGN_OR_RETURN(bool removed, files::remove_private({dir_, dir.below + "/" + name}));
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
  const std::string cmdline = read_kernel_file("/proc/self/cmdline");
  std::string name = std::filesystem::path(cmdline.substr(0, cmdline.find('\0'))).filename().string();
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
