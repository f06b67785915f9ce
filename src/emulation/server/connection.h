// One client connection: its own input buffer (at most one request, read
// only as far as its channel asks) and output buffer (one answer), both
// non-blocking, and a deadline while it owes the server the rest of a
// request or has not read its answer.
#ifndef TPMSEC_SRC_EMULATION_SERVER_CONNECTION_H_
#define TPMSEC_SRC_EMULATION_SERVER_CONNECTION_H_

#include <cstdint>
#include <optional>

#include "emulation/server/channel.h"
#include "tpmsec/transport/socket_io.h"

namespace tpmsec::emulation {

class Connection {
 public:
  enum class Read { kMore, kWouldBlock, kClosed };

  Connection(io::Fd fd, const Channel& channel, uint64_t id) : fd_(std::move(fd)), channel_(channel), id_(id) {}

  int fd() const { return fd_.get(); }
  uint64_t id() const { return id_; }
  const Channel& channel() const { return channel_; }
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
  io::Fd fd_;
  const Channel& channel_;
  uint64_t id_;
  Bytes in_;
  Bytes out_;
  size_t sent_ = 0;
  bool closing_ = false;
  std::optional<int64_t> deadline_;
};

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATION_SERVER_CONNECTION_H_
