#include "tpmsec/data_dir.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tpmsec {

namespace {

bool is_dir(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}

}  // namespace

std::string data_dir() {
  const char* env = std::getenv("TPMSEC_DATA_DIR");
  if (env && *env) return env;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto relative = (exe.parent_path() / ".." / "share" / "tpmsec").lexically_normal();
    if (is_dir(relative)) return relative.string();
  }
#ifdef TPMSEC_INSTALL_DATA_DIR
  if (is_dir(TPMSEC_INSTALL_DATA_DIR)) return TPMSEC_INSTALL_DATA_DIR;
#endif
#ifdef TPMSEC_SOURCE_DATA_DIR
  if (is_dir(TPMSEC_SOURCE_DATA_DIR)) return TPMSEC_SOURCE_DATA_DIR;
#endif
#ifdef TPMSEC_INSTALL_DATA_DIR
  return TPMSEC_INSTALL_DATA_DIR;
#else
  return "/usr/share/tpmsec";
#endif
}

}  // namespace tpmsec
