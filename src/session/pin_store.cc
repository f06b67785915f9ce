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
#include "state_file.h"

namespace tpmsec {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
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

PinStore::PinStore(std::string state_dir) : dir_(std::move(state_dir) + "/null-key-pins") {}

std::string PinStore::path(const std::string& tpm, const std::string& salt) const {
  const std::string id = state_file::tpm_id(tpm);
  return fmt::format("{}/{}-{}", dir_, id, salt);
}

Result<std::optional<PinStore::Pin>> PinStore::get(const std::string& tpm, const std::string& salt) const {
  std::string file = path(tpm, salt);
  bool missing = false;
  TPMSEC_ASSIGN_OR_RETURN(std::string text, state_file::read(file, &missing));
  if (missing) return std::optional<Pin>();
  auto fields = state_file::parse_lines(text);
  const std::string &stored_tpm = fields["tpm"], &stored_salt = fields["salt"], &boot = fields["boot"],
                    &name_hex = fields["name"];
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
  std::string text = fmt::format("tpm={}\nsalt={}\nboot={}\nname={}\n", tpm, salt, boot_id, to_hex(name));
  return state_file::write_private(dir_, path(tpm, salt), text);
}

Result<bool> PinStore::forget(const std::string& tpm) {
  bool any = false;
  for (const char* salt : {"ecc", "rsa"}) {
    TPMSEC_ASSIGN_OR_RETURN(bool removed, state_file::remove(path(tpm, salt)));
    any = any || removed;
  }
  return any;
}

}  // namespace tpmsec
