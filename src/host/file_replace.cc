#include "file_replace.h"

#include <fcntl.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>

namespace tpmsec::files::internal {

int Fd::close() {
  int fd = fd_;
  fd_ = -1;
  return (fd >= 0 && ::close(fd) != 0) ? errno : 0;
}

int write_all(int fd, std::string_view content) {
  for (size_t off = 0; off < content.size();) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    off += static_cast<size_t>(n);
  }
  return 0;
}

int read_all(int fd, size_t max_bytes, std::string* out) {
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return 0;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max_bytes) return EFBIG;
  }
}

std::optional<DirAndName> split(const std::string& path) {
  std::filesystem::path p(path);
  std::string name = p.filename().string();
  if (name.empty() || name == "." || name == "..") return std::nullopt;
  std::string dir = p.parent_path().string();
  return DirAndName{dir.empty() ? "." : dir, name};
}

namespace {

// A temporary name beside `name`: hidden, unguessable (so another user who
// can write the directory cannot create it first and make O_EXCL fail on
// every try), and short enough for NAME_MAX.
std::string temporary_name(const std::string& name) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint8_t raw[12] = {};
  size_t got = 0;
  while (got < sizeof(raw)) {
    ssize_t n = ::getrandom(raw + got, sizeof(raw) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // O_EXCL still refuses a name that exists
    got += static_cast<size_t>(n);
  }
  std::string suffix;
  for (uint8_t b : raw) suffix += kAlphabet[b % (sizeof(kAlphabet) - 1)];
  return "." + name.substr(0, 200) + ".tpmsec-" + suffix;
}

}  // namespace

int replace_at(int dir_fd, const std::string& name, std::string_view content, const ReplaceOptions& options) {
  std::string tmp;
  Fd fd;
  for (int attempt = 0; attempt < 16 && fd.get() < 0; ++attempt) {
    tmp = temporary_name(name);
    fd.reset(::openat(dir_fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, options.mode));
    if (fd.get() < 0 && errno != EEXIST) return errno;
  }
  if (fd.get() < 0) return EEXIST;
  int err = 0;
  if (options.keep != nullptr) {
    if (::geteuid() == 0) (void)::fchown(fd.get(), options.keep->st_uid, options.keep->st_gid);
    if (::fchmod(fd.get(), options.keep->st_mode & 0777) != 0) err = errno;
  } else if (options.exact && ::fchmod(fd.get(), options.mode) != 0) {
    err = errno;
  }
  if (err == 0) err = write_all(fd.get(), content);
  if (err == 0 && options.sync && ::fsync(fd.get()) != 0) err = errno;
  if (int c = fd.close(); err == 0) err = c;
  if (err == 0 && ::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) err = errno;
  if (err != 0) ::unlinkat(dir_fd, tmp.c_str(), 0);
  return err;
}

}  // namespace tpmsec::files::internal
