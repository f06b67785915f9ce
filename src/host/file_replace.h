// The one way tpmsec replaces a file (reports and state alike): a temporary
// file created O_CREAT|O_EXCL|O_NOFOLLOW beside the name, then renamed over
// it. include/tpmsec/host/files.h says which files go this way.
#ifndef TPMSEC_SRC_HOST_FILE_REPLACE_H_
#define TPMSEC_SRC_HOST_FILE_REPLACE_H_

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tpmsec::files::internal {

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // Closes now; the errno of a failed close, else 0.
  int close();
  // Gives the descriptor up to another owner (fdopendir).
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Writes all of `content` to `fd`; the errno of a failure, else 0.
int write_all(int fd, std::string_view content);

// Reads `fd` to its end into `out`: the errno of a failure, EFBIG when it
// holds more than `max_bytes`, else 0.
int read_all(int fd, size_t max_bytes, std::string* out);

// `path` split into its directory ("." when none) and its last component;
// none when the last component names no file ("", ".", "..", "dir/").
struct DirAndName {
  std::string dir;
  std::string name;
};
std::optional<DirAndName> split(const std::string& path);

// How the new file is made.
struct ReplaceOptions {
  mode_t mode = 0644;                 // for the temporary file (less the umask unless exact)
  bool exact = false;                 // set `mode` exactly (fchmod), whatever the umask
  bool sync = false;                  // fsync before the rename
  const struct stat* keep = nullptr;  // a replaced regular file: keep its mode (and, for root, owner)
};

// Writes `content` to a new temporary file in directory `dir_fd` and renames
// it over `name` there (a symlink at `name` is replaced, never followed).
// The errno of a failure, else 0; on failure the temporary file is removed
// and `name` is as it was.
int replace_at(int dir_fd, const std::string& name, std::string_view content, const ReplaceOptions& options);

}  // namespace tpmsec::files::internal

#endif  // TPMSEC_SRC_HOST_FILE_REPLACE_H_
