// One client connection: its own input buffer (at most one request, handed
// out only as far as its protocol asks) and output buffer (one answer), both
// non-blocking, and a deadline while it owes the server the rest of a
// request or has not read its answer. What the socket has is taken in one
// read of up to kReadAhead bytes (a request that arrived whole: one system
// call); bytes beyond what the protocol asked for wait here, bounded, for
// the next request (buffered()), so a client's second frame is never part
// of its first.
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_CONNECTION_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "resource_manager/fd.h"
#include "tpmsec/bytes.h"

namespace tpmsec::server {

class Connection {
 public:
  enum class Read { kMore, kWouldBlock, kClosed };
  static constexpr size_t kReadAhead = 4096;

  explicit Connection(Fd fd) : fd_(std::move(fd)) {}

  int fd() const { return fd_.get(); }
  Bytes& input() { return in_; }

  // Moves at most `n` bytes into the input, from what was read ahead or else
  // from the socket; kClosed at the end of the stream or an error.
  Read read(size_t n);
  // Bytes read from the socket and not yet in the input: the loop reads them
  // without waiting for the socket (it may have nothing more to say).
  bool buffered() const { return ahead_begin_ < ahead_end_; }
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
  std::unique_ptr<uint8_t[]> ahead_;  // kReadAhead bytes, made at the first read
  size_t ahead_begin_ = 0, ahead_end_ = 0;
  bool tcp_ = true;  // TCP_QUICKACK applies (false once the socket refused it: a Unix socket)
  Bytes out_;
  size_t sent_ = 0;
  bool closing_ = false;
  std::optional<int64_t> deadline_;
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_CONNECTION_H_
