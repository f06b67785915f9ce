// An owned file descriptor, closed when dropped: the one RAII holder of a
// descriptor for every layer (the transports' sockets, the server's
// listeners and connections, the D-Bus front end's socket pairs).
#ifndef TPMSEC_UNIQUE_FD_H_
#define TPMSEC_UNIQUE_FD_H_

#include <unistd.h>

namespace tpmsec {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // The descriptor, no longer owned.
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace tpmsec

#endif  // TPMSEC_UNIQUE_FD_H_
