#include "tpmsec/host/data_dir.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tpmsec {

namespace {

bool is_dir(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}

// The data beside the shared object this code is in, when it is one (the
// TCTI, loaded into a program of another prefix): <dir>/share/tpmsec in a
// build tree, <prefix>/share/tpmsec from <prefix>/lib or <prefix>/lib/<multiarch>.
std::filesystem::path beside_shared_object() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&beside_shared_object), &info) == 0 || !info.dli_fname) return {};
  std::error_code ec;
  auto self = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return {};
  auto dir = self.parent_path();
  for (const auto& candidate :
       {dir / "share" / "tpmsec", dir / ".." / "share" / "tpmsec", dir / ".." / ".." / "share" / "tpmsec"}) {
    if (is_dir(candidate)) return candidate.lexically_normal();
  }
  return {};
}

}  // namespace

// No path of the build or the install is compiled in (reproducible builds, a
// moved prefix): everything is found from the running program's own location.
std::string data_dir() {
  const char* env = std::getenv("TPMSEC_DATA_DIR");
  if (env && *env) return env;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "/usr/share/tpmsec";
  const auto bin = exe.parent_path();
  // A build tree: the build makes <build>/share/tpmsec (a link to data/), and
  // its programs sit in <build> (the CLI) or one level below (tests, bench).
  const auto build_tree = bin / "share" / "tpmsec";
  const auto installed = (bin / ".." / "share" / "tpmsec").lexically_normal();
  if (is_dir(build_tree)) return build_tree.string();
  if (!is_dir(installed)) {
    if (auto lib = beside_shared_object(); !lib.empty()) return lib.string();
  }
  // A program of its own on the library, outside any prefix of tpmsec's:
  // the distribution's place.
  if (!is_dir(installed) && is_dir("/usr/share/tpmsec")) return "/usr/share/tpmsec";
  return installed.string();
}

}  // namespace tpmsec
