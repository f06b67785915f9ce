#include "tpmsec/pin_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

constexpr size_t kMaxPinFileBytes = 4096;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// One short text file: "tpm=...", "salt=...", "boot=...", "name=..." lines.
Result<std::string> read_small(const std::string& path, bool* missing) {
  *missing = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *missing = errno == ENOENT;
    if (*missing) return std::string();
    return runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  std::string text(kMaxPinFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPinFileBytes) return parse_error(fmt::format("{}: not a tpmsec pin file (too large)", path));
  return text;
}

Status make_private_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return runtime_error(fmt::format("cannot create {}: {}", dir, ec.message()));
  if (::chmod(dir.c_str(), 0700) != 0) {
    return runtime_error(fmt::format("cannot restrict {} to its owner: {}", dir, std::strerror(errno)));
  }
  return ok_status();
}

}  // namespace

std::string default_state_dir() {
  if (std::string d = env_or_empty("TPMSEC_STATE_DIR"); !d.empty()) return d;
  if (::geteuid() == 0) return "/var/lib/tpmsec";
  if (std::string x = env_or_empty("XDG_STATE_HOME"); !x.empty()) return x + "/tpmsec";
  if (std::string h = env_or_empty("HOME"); !h.empty()) return h + "/.local/state/tpmsec";
  return "/var/lib/tpmsec";
}

Result<std::string> host_boot_id() {
  if (std::string id = env_or_empty("TPMSEC_BOOT_ID"); !id.empty()) return id;
  bool missing = false;
  TPMSEC_ASSIGN_OR_RETURN(std::string text, read_small("/proc/sys/kernel/random/boot_id", &missing));
  std::string id(trim(text));
  if (missing || id.empty()) return runtime_error("cannot read this host's boot id (/proc/sys/kernel/random/boot_id)");
  return id;
}

PinStore::PinStore(std::string state_dir) : dir_(std::move(state_dir) + "/null-key-pins") {}

std::string PinStore::path(const std::string& tpm, const std::string& salt) const {
  // The TPM string can hold any character: the file is named by its hash.
  auto digest = crypto::hash(alg::kSha256, {as_bytes(std::string_view(tpm))});
  std::string id = digest.ok() ? to_hex(ByteView(*digest).first(16)) : "unknown";
  return fmt::format("{}/{}-{}", dir_, id, salt);
}

Result<std::optional<PinStore::Pin>> PinStore::get(const std::string& tpm, const std::string& salt) const {
  std::string file = path(tpm, salt);
  bool missing = false;
  TPMSEC_ASSIGN_OR_RETURN(std::string text, read_small(file, &missing));
  if (missing) return std::optional<Pin>();
  std::string stored_tpm, stored_salt, boot, name_hex;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "tpm") stored_tpm = value;
    if (key == "salt") stored_salt = value;
    if (key == "boot") boot = value;
    if (key == "name") name_hex = value;
  }
  auto name = from_hex(name_hex);
  if (stored_tpm != tpm || stored_salt != salt || boot.empty() || !name.ok() || name->size() < 2) {
    return parse_error(fmt::format("{}: not a tpmsec pin file for {} ({} salt); remove it with "
                                   "'tpmsec null-key --forget --tpm {}'",
                                   file, tpm, salt, tpm));
  }
  return std::optional<Pin>(Pin{std::move(*name), std::move(boot)});
}

Result<std::optional<Bytes>> PinStore::current(const std::string& tpm, const std::string& salt,
                                               const std::string& boot_id) const {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Pin> pin, get(tpm, salt));
  if (!pin || pin->boot_id != boot_id) return std::optional<Bytes>();
  return std::optional<Bytes>(std::move(pin->name));
}

Status PinStore::put(const std::string& tpm, const std::string& salt, const std::string& boot_id, ByteView name) {
  if (tpm.find('\n') != std::string::npos || boot_id.find('\n') != std::string::npos) {
    return usage_error("a TPM string or boot id with a newline cannot be pinned");
  }
  TPMSEC_RETURN_IF_ERROR(make_private_dir(dir_));
  std::string file = path(tpm, salt);
  std::string tmp = file + ".tmp";
  std::string text = fmt::format("tpm={}\nsalt={}\nboot={}\nname={}\n", tpm, salt, boot_id, to_hex(name));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), file.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    return runtime_error(fmt::format("cannot write {}: {}", file, std::strerror(saved)));
  }
  return ok_status();
}

Result<bool> PinStore::forget(const std::string& tpm) {
  bool any = false;
  for (const char* salt : {"ecc", "rsa"}) {
    std::string file = path(tpm, salt);
    if (::unlink(file.c_str()) == 0) {
      any = true;
    } else if (errno != ENOENT) {
      return runtime_error(fmt::format("cannot remove {}: {}", file, std::strerror(errno)));
    }
  }
  return any;
}

}  // namespace tpmsec
