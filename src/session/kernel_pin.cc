#include "tpmsec/kernel_pin.h"

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
  const char* root = std::getenv("TPMSEC_SYSFS_ROOT");
  std::string file = std::string(root && *root ? root : "/sys") + "/class/tpm/tpm" + number + "/null_name";
  std::error_code ec;
  return std::filesystem::is_regular_file(file, ec) ? file : "";
}

}  // namespace tpmsec
