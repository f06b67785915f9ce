#include "state_file.h"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "tpmsec/constants.h"
#include "tpmsec/host/files.h"
#include "tpmsec/text.h"
#include "tpmsec/wire.h"

namespace tpmsec::state_file {

const char* salt_label(SaltKind kind) { return kind == SaltKind::kRsa ? "rsa" : "ecc"; }

std::optional<uint32_t> handle_value(const std::string& text) {
  if (text.size() != 10 || text.rfind("0x", 0) != 0) return std::nullopt;
  auto v = from_hex(text.substr(2));
  if (!v.ok() || v->size() != 4) return std::nullopt;
  return load_be32(v->data());
}

Result<std::string> read(const std::string& path, bool* missing) {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<std::string> text, files::read_private(path, kMaxBytes));
  *missing = !text.has_value();
  return text.value_or(std::string());
}

std::map<std::string, std::string> parse_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

Result<std::optional<std::map<std::string, std::string>>> read_fields(const std::string& path) {
  bool missing = false;
  TPMSEC_ASSIGN_OR_RETURN(std::string text, read(path, &missing));
  if (missing) return std::optional<std::map<std::string, std::string>>();
  auto fields = parse_lines(text);
  secure_wipe(text.data(), text.size());
  return std::optional<std::map<std::string, std::string>>(std::move(fields));
}

Status make_private_dir(const std::string& dir) { return files::make_private_dir(dir); }

Status write_private(const std::string& dir, const std::string& path, const std::string& text,
                     files::Durability durability) {
  TPMSEC_RETURN_IF_ERROR(files::make_private_dir(dir));
  return files::write_private(path, text, durability);
}

Result<bool> remove(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return runtime_error(fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
}

}  // namespace tpmsec::state_file
