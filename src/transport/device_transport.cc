// TPM character devices: the kernel driver takes one write() of a whole
// command and returns the whole response from one read().
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "tpmsec/transport/socket_io.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"
#include "transport_limits.h"

namespace tpmsec {
namespace {

using transport_limits::kMaxResponse;
using transport_limits::kTimeoutMs;

// Whether `fd` is one of the kernel's resource-managed TPM devices: its
// character device belongs to the "tpmrm" class (/sys/dev/char/MAJ:MIN/subsystem),
// whatever the path it was opened by is called.
bool is_tpmrm(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  std::error_code ec;
  auto subsystem = std::filesystem::read_symlink(
      fmt::format("/sys/dev/char/{}:{}/subsystem", major(st.st_rdev), minor(st.st_rdev)), ec);
  return !ec && subsystem.filename() == "tpmrm";
}

class DeviceTransport final : public Transport {
 public:
  DeviceTransport(io::Fd fd, std::string label)
      : fd_(std::move(fd)), label_(std::move(label)), private_handles_(is_tpmrm(fd_.get())) {}

  Result<Bytes> transmit(ByteView command) override {
    ssize_t n;
    do {
      n = ::write(fd_.get(), command.data(), command.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return runtime_error(fmt::format("cannot write to {}: {}", label_, std::strerror(errno)));
    if (static_cast<size_t>(n) != command.size()) {
      return runtime_error(fmt::format("{} accepted {} of {} command bytes", label_, n, command.size()));
    }
    pollfd p{fd_.get(), POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, kTimeoutMs);
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) return runtime_error(fmt::format("{} did not answer within {} ms", label_, kTimeoutMs));
    Bytes response(kMaxResponse);
    do {
      n = ::read(fd_.get(), response.data(), response.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return runtime_error(fmt::format("cannot read from {}: {}", label_, std::strerror(errno)));
    if (n == 0) return runtime_error(fmt::format("{} returned no response", label_));
    response.resize(static_cast<size_t>(n));
    return response;
  }

  std::string describe() const override { return device_tpm_string(label_); }
  bool private_handles() const override { return private_handles_; }

 private:
  io::Fd fd_;
  std::string label_;
  bool private_handles_;
};

}  // namespace

Result<std::unique_ptr<Transport>> open_device(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == EBUSY) {
      return runtime_error(fmt::format(
          "{} is busy: /dev/tpm0 admits one opener at a time (another program or a TSS resource manager has it); "
          "use /dev/tpmrm0 to share the TPM",
          path));
    }
    return runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(e)));
  }
  return device_from_fd(fd, path);
}

std::unique_ptr<Transport> device_from_fd(int fd, std::string label) {
  return std::make_unique<DeviceTransport>(io::Fd(fd), std::move(label));
}

}  // namespace tpmsec
