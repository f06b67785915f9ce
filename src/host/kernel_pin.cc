#include "tpmsec/host/kernel_pin.h"

#include <cstdlib>
#include <filesystem>
#include <string>

namespace tpmsec {

std::string kernel_null_name_file(std::string_view device_path) {
  std::string base = std::filesystem::path(std::string(device_path)).filename().string();
  std::string number;
  if (base.rfind("tpmrm", 0) == 0) {
    number = base.substr(5);
  } else if (base.rfind("tpm", 0) == 0) {
    number = base.substr(3);
  }
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return "";
  std::string root = "/sys";
#ifdef TPMSEC_TEST_HOOKS
  // Test builds only (CMake option TPMSEC_TEST_HOOKS): a release binary reads
  // the kernel's pin from the real sysfs whatever its environment says.
  if (const char* r = std::getenv("TPMSEC_SYSFS_ROOT"); r && *r) root = r;
#endif
  std::string file = root + "/class/tpm/tpm" + number + "/null_name";
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) ? file : "";
}

}  // namespace tpmsec
