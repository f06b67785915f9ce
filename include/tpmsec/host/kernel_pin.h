// The kernel's pin of the null key. Linux (drivers/char/tpm/tpm2-sessions.c,
// since 6.10 with CONFIG_TCG_TPM2_HMAC) creates the null primary at boot and
// exports its name as /sys/class/tpm/tpmN/null_name. For a device: transport
// that file is the strongest anchor a host has without an EK certificate: it
// was taken by the kernel before user space ran.
#ifndef TPMSEC_HOST_KERNEL_PIN_H_
#define TPMSEC_HOST_KERNEL_PIN_H_

#include <string>
#include <string_view>

namespace tpmsec {

// The null_name file of the TPM behind `device_path` (/dev/tpm0 and
// /dev/tpmrm0 both map to tpm0), under /sys ($TPMSEC_SYSFS_ROOT in test
// builds, CMake option TPMSEC_TEST_HOOKS; release builds ignore it).
// Empty when the path names no TPM device or the kernel exports no pin.
std::string kernel_null_name_file(std::string_view device_path);

}  // namespace tpmsec

#endif  // TPMSEC_HOST_KERNEL_PIN_H_
