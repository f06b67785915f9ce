// The emulated chip's own protocols (swtpm's control channel, mssim's TPM
// and platform ports), as codecs over the bytes a client has sent so far
// (the server layer's Parse and Served, tpmsec-server/resource_manager/protocol.h; swtpm's
// data channel is the server's raw_tpm_protocol()). What a request does
// goes through a ChipPort: TPM commands through the client's port of the
// server layer (its handle space), the platform's signals to the chip.
#ifndef TPMSEC_SRC_EMULATOR_SERVER_CHANNEL_H_
#define TPMSEC_SRC_EMULATOR_SERVER_CHANNEL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "tpmsec-server/resource_manager/protocol.h"
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
  // CMD_SET_DATAFD: the descriptor that came with the request becomes a
  // data connection (swtpm's --ctrl type=unixio). False where none came or
  // the channel cannot take one (TCP).
  virtual bool attach_data_channel() { return false; }
  virtual void log(const std::string& line) = 0;
};

using server::Parse;
using server::Served;

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

// How the control channel's requests are framed. kPacked: a locality is one
// byte after the code (tpm2-tss's tcti-swtpm, tpmsec's swtpm transport, over
// TCP). kStructs: the request is the whole ptm_* union of tpm_ioctl.h, as
// qemu's tpm-emulator backend and swtpm_ioctl write it (CMD_SET_LOCALITY,
// CMD_RESET_TPMESTABLISHED: 4 bytes), over swtpm's Unix control socket,
// which also takes CMD_SET_DATAFD.
enum class ControlFraming { kPacked, kStructs };

std::unique_ptr<Channel> swtpm_control_channel(ControlFraming framing = ControlFraming::kPacked);
std::unique_ptr<Channel> mssim_tpm_channel();
std::unique_ptr<Channel> mssim_platform_channel();

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATOR_SERVER_CHANNEL_H_
