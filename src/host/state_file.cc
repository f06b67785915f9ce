#include "state_file.h"

#include <fmt/format.h>

#include <sstream>

#include "tpmsec/constants.h"
#include "tpmsec/text.h"
#include "tpmsec/wire.h"

namespace tpmsec::state_file {

const char* folder(StateRecord what) {
  switch (what) {
    case StateRecord::kNullKeyPin:
      return "null-key-pins";
    case StateRecord::kEkPin:
      return "ek-pins";
    case StateRecord::kKeptInfo:
    case StateRecord::kKeptNullKey:
    case StateRecord::kKeptCommandCount:
    case StateRecord::kKeptCallerSession:
      return "session-cache";
    case StateRecord::kBindSecret:
      return "bind";
    case StateRecord::kSaltKey:
      return "salt-key";
    case StateRecord::kHeldHandles:
      return "held-handles";
  }
  return "unknown";
}

const char* salt_label(SaltKind kind) { return kind == SaltKind::kRsa ? "rsa" : "ecc"; }

std::optional<uint32_t> handle_value(const std::string& text) {
  if (text.size() != 10 || text.rfind("0x", 0) != 0) return std::nullopt;
  auto v = from_hex(text.substr(2));
  if (!v.ok() || v->size() != 4) return std::nullopt;
  return load_be32(v->data());
}

Result<std::optional<std::string>> read(const files::StatePath& file) { return files::read_private(file, kMaxBytes); }

std::map<std::string, std::string> parse_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

Result<std::optional<std::map<std::string, std::string>>> read_fields(const files::StatePath& file) {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<std::string> text, read(file));
  if (!text) return std::optional<std::map<std::string, std::string>>();
  auto fields = parse_lines(*text);
  secure_wipe(text->data(), text->size());
  return std::optional<std::map<std::string, std::string>>(std::move(fields));
}

}  // namespace tpmsec::state_file
