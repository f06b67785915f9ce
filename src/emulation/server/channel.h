// One protocol on one port, as a codec over the bytes a client has sent so
// far: how many more bytes to read before anything can be decided, whether
// a whole request is there, or why the connection must close. The codecs
// never block and never buffer more than one request, which they bound
// before reading it (a TPM command: kMaxCommandBytes). What a request does
// goes through a ChipPort.
#ifndef TPMSEC_SRC_EMULATION_SERVER_CHANNEL_H_
#define TPMSEC_SRC_EMULATION_SERVER_CHANNEL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::emulation {

// What the channels may do to the chip, on behalf of one client.
class ChipPort {
 public:
  virtual ~ChipPort() = default;
  // A TPM command at `locality`, or at the control channel's locality.
  virtual Bytes execute(ByteView command) = 0;
  virtual Bytes execute_at(ByteView command, uint8_t locality) = 0;
  virtual Status tpm_init(bool delete_volatile) = 0;
  virtual void power_off() = 0;
  virtual bool powered() const = 0;
  virtual void set_locality(uint8_t locality) = 0;
  // Ends the server's loop after this request (CMD_SHUTDOWN, TPM_STOP).
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

class Channel {
 public:
  virtual ~Channel() = default;
  virtual Parse parse(ByteView buffered) const = 0;
  // The client closed, or stalled, with an incomplete request buffered
  // (never empty): what to answer before the connection closes.
  virtual Parse truncated(ByteView buffered) const = 0;
  virtual Served serve(ByteView request, ChipPort& chip) const = 0;
  // A data channel: its connections are clients with handles of their own.
  virtual bool carries_commands() const = 0;
};

std::unique_ptr<Channel> swtpm_data_channel();
std::unique_ptr<Channel> swtpm_control_channel();
std::unique_ptr<Channel> mssim_tpm_channel();
std::unique_ptr<Channel> mssim_platform_channel();

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATION_SERVER_CHANNEL_H_
