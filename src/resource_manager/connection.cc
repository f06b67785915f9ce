#include "resource_manager/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace tpmsec::server {

Connection::Read Connection::read(size_t n) {
  if (!buffered()) {
    if (!ahead_) ahead_ = std::make_unique<uint8_t[]>(kReadAhead);
    ssize_t got;
    do {
      got = ::recv(fd_.get(), ahead_.get(), kReadAhead, 0);
    } while (got < 0 && errno == EINTR);
    if (got == 0) return Read::kClosed;
    if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? Read::kWouldBlock : Read::kClosed;
    ahead_begin_ = 0;
    ahead_end_ = static_cast<size_t>(got);
    // On TCP, ACK at once, as a chip answers at once: tpm2-tss's mssim TCTI writes a
    // command's header and body separately, and with Nagle on its side the
    // body waits for the header's ACK, which Linux delays (~40 ms) unless
    // asked. TCP_QUICKACK does not stick (tcp(7)): set after every read. A
    // Unix socket refuses it once and is not asked again.
    int one = 1;
    if (tcp_ && ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one)) != 0) tcp_ = false;
  }
  const size_t take = std::min(n, ahead_end_ - ahead_begin_);
  in_.insert(in_.end(), ahead_.get() + ahead_begin_, ahead_.get() + ahead_begin_ + take);
  ahead_begin_ += take;
  return Read::kMore;
}

bool Connection::send(ByteView answer) {
  out_.assign(answer.begin(), answer.end());
  sent_ = 0;
  return flush();
}

bool Connection::flush() {
  while (sent_ < out_.size()) {
    ssize_t n = ::send(fd_.get(), out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    sent_ += static_cast<size_t>(n);
  }
  out_.clear();
  sent_ = 0;
  return true;
}

void Connection::update_deadline(int64_t now_ns, int64_t timeout_ns) {
  if (in_.empty() && !sending()) {
    deadline_.reset();
  } else if (!deadline_) {
    deadline_ = now_ns + timeout_ns;
  }
}

}  // namespace tpmsec::server
