#include "state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/text.h"
#include "tpmsec/wire.h"

namespace tpmsec::state_file {

std::string tpm_id(const std::string& tpm) {
  auto digest = crypto::hash(alg::kSha256, {as_bytes(std::string_view(tpm))});
  return digest.ok() ? to_hex(ByteView(*digest).first(16)) : "unknown";
}

std::optional<uint32_t> handle_value(const std::string& text) {
  if (text.size() != 10 || text.rfind("0x", 0) != 0) return std::nullopt;
  auto v = from_hex(text.substr(2));
  if (!v.ok() || v->size() != 4) return std::nullopt;
  return load_be32(v->data());
}

Result<std::string> read(const std::string& path, bool* missing) {
  *missing = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *missing = errno == ENOENT;
    if (*missing) return std::string();
    return runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxBytes) return parse_error(fmt::format("{}: not a tpmsec state file (too large)", path));
  return text;
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

Status make_private_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return runtime_error(fmt::format("cannot create {}: {}", dir, ec.message()));
  if (::chmod(dir.c_str(), 0700) != 0) {
    return runtime_error(fmt::format("cannot restrict {} to its owner: {}", dir, std::strerror(errno)));
  }
  return ok_status();
}

Status write_private(const std::string& dir, const std::string& path, const std::string& text) {
  TPMSEC_RETURN_IF_ERROR(make_private_dir(dir));
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int saved = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) saved = errno;
    ::unlink(tmp.c_str());
    return runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(saved)));
  }
  return ok_status();
}

Result<bool> remove(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return runtime_error(fmt::format("cannot remove {}: {}", path, std::strerror(errno)));
}

}  // namespace tpmsec::state_file
