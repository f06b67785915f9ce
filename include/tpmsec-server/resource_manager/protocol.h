// One protocol on one listening socket, as a codec over the bytes a client
// has sent so far: how many more bytes to read before anything can be
// decided, whether a whole request is there, or why the connection must
// close. A codec never blocks and never buffers more than one request, which
// it bounds before reading it. What a request does goes through the
// client's ClientPort. The raw TPM protocol (raw_tpm_protocol()) is
// /dev/tpmrm0's: one command frame written, one response frame read; other
// front ends (tpmsec emulate's swtpm control and mssim ports) bring their own.
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_PROTOCOL_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_PROTOCOL_H_

#include <cstddef>
#include <memory>
#include <string>

#include "tpmsec/bytes.h"

namespace tpmsec::server {

// What a protocol may do on behalf of one client.
class ClientPort {
 public:
  virtual ~ClientPort() = default;
  // A TPM command through the client's handle space (or straight to the TPM
  // when the server does not isolate clients); always a TPM response frame.
  virtual Bytes execute(ByteView command) = 0;
  // Ends the server's loop after this request (a control channel's shutdown).
  virtual void stop_serving() = 0;
  virtual void log(const std::string& line) = 0;
};

struct Parse {
  enum class Kind {
    kNeed,     // read at most `need` more bytes, then parse again
    kRequest,  // the buffered bytes are one whole request
    kRefuse,   // send `answer` (may be empty), log `why`, close
  };
  Kind kind = Kind::kNeed;
  size_t need = 0;
  Bytes answer;
  std::string why;

  static Parse more(size_t n) { return {Kind::kNeed, n, {}, {}}; }
  static Parse request() { return {Kind::kRequest, 0, {}, {}}; }
  static Parse refuse(Bytes answer, std::string why) { return {Kind::kRefuse, 0, std::move(answer), std::move(why)}; }
};

struct Served {
  Bytes answer;
  bool close = false;  // after the answer
};

class Protocol {
 public:
  virtual ~Protocol() = default;
  // `max_frame` is the client's ClientLimits::max_frame_bytes.
  virtual Parse parse(ByteView buffered, size_t max_frame) const = 0;
  // The client closed, or stalled, with an incomplete request buffered
  // (never empty): what to answer before the connection closes.
  virtual Parse truncated(ByteView buffered) const = 0;
  virtual Served serve(ByteView request, ClientPort& port) const = 0;
  // Its connections are clients with a handle space of their own (a
  // control channel's are not).
  virtual bool carries_commands() const = 0;
};

// The raw TPM command, the raw response (/dev/tpmrm0, swtpm's data channel).
// A malformed header is answered with TPM_RC_BAD_TAG or TPM_RC_COMMAND_SIZE
// and the connection closed; a frame cut short gets no answer.
std::shared_ptr<const Protocol> raw_tpm_protocol();

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_PROTOCOL_H_
