// One client connection: its own input buffer (at most one request, read
// only as far as its protocol asks) and output buffer (one answer), both
// non-blocking, and a deadline while it owes the server the rest of a
// request or has not read its answer.
#ifndef TPMSEC_SRC_SERVER_CONNECTION_H_
#define TPMSEC_SRC_SERVER_CONNECTION_H_

#include <cstdint>
#include <optional>

#include "server/fd.h"
#include "tpmsec/bytes.h"

namespace tpmsec::server {

class Connection {
 public:
  enum class Read { kMore, kWouldBlock, kClosed };

  explicit Connection(Fd fd) : fd_(std::move(fd)) {}

  int fd() const { return fd_.get(); }
  Bytes& input() { return in_; }

  // Reads at most `n` bytes into the input; kClosed at the end of the stream
  // or an error.
  Read read(size_t n);
  // Queues an answer and sends what the socket takes now.
  bool send(ByteView answer);
  // Sends more of the queued answer; false on an error.
  bool flush();
  bool sending() const { return sent_ < out_.size(); }

  // Close once the answer is out (a refused or last request).
  void close_after_answer() { closing_ = true; }
  bool closing() const { return closing_; }

  // The deadline (steady ns) while a request is incomplete or an answer unsent.
  std::optional<int64_t> deadline() const { return deadline_; }
  void update_deadline(int64_t now_ns, int64_t timeout_ns);
  // A request was served: its answer gets a deadline of its own.
  void restart_deadline() { deadline_.reset(); }

 private:
  Fd fd_;
  Bytes in_;
  Bytes out_;
  size_t sent_ = 0;
  bool closing_ = false;
  std::optional<int64_t> deadline_;
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_SERVER_CONNECTION_H_
