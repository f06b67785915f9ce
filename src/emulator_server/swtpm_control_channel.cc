// swtpm's control channel (swtpm's include/swtpm/tpm_ioctl.h, "commands used
// by the non-CUSE TPMs"): a big-endian u32 command code and its request
// fields; the answer is the response fields, starting with a u32 result
// (TPM 1.2 codes, as swtpm answers). Framing: channel.h's ControlFraming.
#include <optional>

#include <fmt/format.h>

#include "emulator_server/channel.h"
#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec::emulation {
namespace {

constexpr uint32_t kGetCapability = 0x01, kInit = 0x02, kShutdown = 0x03, kGetTpmEstablished = 0x04,
                   kSetLocality = 0x05, kHashStart = 0x06, kHashData = 0x07, kHashEnd = 0x08, kCancel = 0x09,
                   kStoreVolatile = 0x0a, kResetTpmEstablished = 0x0b, kStop = 0x0e, kGetConfig = 0x0f,
                   kSetDataFd = 0x10, kSetBufferSize = 0x11;
constexpr uint32_t kInitDeleteVolatile = 1;
// PTM_CAP_* of what is implemented here.
constexpr uint32_t kCaps = 1 /*INIT*/ | 2 /*SHUTDOWN*/ | 4 /*GET_TPMESTABLISHED*/ | 8 /*SET_LOCALITY*/ |
                           0x20 /*CANCEL_TPM_CMD*/ | 0x40 /*STORE_VOLATILE*/ | 0x80 /*RESET_TPMESTABLISHED*/ |
                           0x400 /*STOP*/ | 0x800 /*GET_CONFIG*/ | 0x2000 /*SET_BUFFERSIZE*/;
constexpr uint32_t kCapSetDataFd = 0x1000;
// ptm_est's response: ptm_res and the bit, padded to the union's 8 bytes.
constexpr size_t kEstablishedAnswer = 8;
constexpr uint32_t kResultFail = 0x09;          // TPM_FAIL
constexpr uint32_t kResultBadParameter = 0x03;  // TPM_BAD_PARAMETER
constexpr uint32_t kResultBadOrdinal = 0x0a;    // TPM_BAD_ORDINAL
constexpr size_t kControlCode = 4;
constexpr uint32_t kMaxHashData = kMaxCommandBytes;

Bytes result(uint32_t code) { return be32(code); }

// The request fields' size after the code (CMD_HASH_DATA: its length field;
// the data follow); nullopt for a code not implemented here.
std::optional<size_t> fields_of(uint32_t code, ControlFraming framing) {
  const bool structs = framing == ControlFraming::kStructs;
  switch (code) {
    case kInit:
    case kHashData:
    case kSetBufferSize:
      return 4;
    case kSetLocality:
    case kResetTpmEstablished:
      return structs ? 4 : 1;  // ptm_loc, ptm_reset_est: a u8 in a union with the u32 result
    case kSetDataFd:
      if (!structs) return std::nullopt;
      return 0;
    case kGetCapability:
    case kShutdown:
    case kGetTpmEstablished:
    case kHashStart:
    case kHashEnd:
    case kCancel:
    case kStoreVolatile:
    case kStop:
    case kGetConfig:
      return 0;
    default:
      return std::nullopt;
  }
}

class SwtpmControl final : public Channel {
 public:
  explicit SwtpmControl(ControlFraming framing) : framing_(framing) {}

  Parse parse(ByteView buffered) const override {
    if (buffered.size() < kControlCode) return Parse::more(kControlCode - buffered.size());
    const uint32_t code = load_be32(buffered.data());
    auto fields = fields_of(code, framing_);
    if (!fields) {
      // Its request fields are unknown: the framing is lost.
      return Parse::refuse(result(kResultBadOrdinal),
                           fmt::format("control: unknown command 0x{:x}: TPM_BAD_ORDINAL, connection closed", code));
    }
    size_t size = kControlCode + *fields;
    if (buffered.size() < size) return Parse::more(size - buffered.size());
    if (code == kHashData) {
      const uint32_t n = load_be32(buffered.data() + kControlCode);
      if (n > kMaxHashData) {
        return Parse::refuse(result(kResultBadParameter),
                             fmt::format("control: CMD_HASH_DATA of {} bytes refused: connection closed", n));
      }
      size += n;
      if (buffered.size() < size) return Parse::more(size - buffered.size());
    }
    return Parse::request();
  }

  Parse truncated(ByteView buffered) const override {
    if (buffered.size() < kControlCode) return Parse::refuse({}, "");
    return Parse::refuse(result(kResultBadParameter),
                         "control channel: truncated request: error answer, connection closed");
  }

  Served serve(ByteView request, ChipPort& chip) const override {
    const uint32_t code = load_be32(request.data());
    const uint8_t* fields = request.data() + kControlCode;
    Writer w;
    switch (code) {
      case kGetCapability:  // ptm_cap: a u64, no result field
        w.u32(0);
        w.u32(framing_ == ControlFraming::kStructs ? kCaps | kCapSetDataFd : kCaps);
        break;
      case kSetDataFd: {
        const bool taken = chip.attach_data_channel();
        chip.log(taken ? "control: data channel attached (CMD_SET_DATAFD)"
                       : "control: CMD_SET_DATAFD without a stream socket: TPM_FAIL");
        w.u32(taken ? 0 : kResultFail);
        break;
      }
      case kInit: {
        Status s = chip.tpm_init(load_be32(fields) & kInitDeleteVolatile);
        chip.log(s.ok() ? "control: _TPM_Init (CMD_INIT)" : "control: CMD_INIT failed: " + s.error().message());
        w.u32(s.ok() ? 0 : kResultFail);
        break;
      }
      case kShutdown:
      case kStop:
        chip.power_off();
        chip.log(code == kStop ? "control: TPM stopped (CMD_STOP)" : "control: CMD_SHUTDOWN: stopping");
        if (code == kShutdown) chip.stop_serving();
        w.u32(0);
        break;
      case kGetTpmEstablished:
        w.u32(0);
        w.bytes(Bytes(kEstablishedAnswer - 4, 0));  // the bit (never set: no DRTM is modelled), padding
        break;
      case kSetLocality:
      case kResetTpmEstablished:
        if (fields[0] > 4) {
          chip.log(fmt::format("control: locality {} refused", fields[0]));
          w.u32(kResultBadParameter);
          break;
        }
        if (code == kSetLocality) chip.set_locality(fields[0]);
        w.u32(0);
        break;
      case kGetConfig:
        w.u32(0);
        w.u32(0);  // no file or migration key
        break;
      case kSetBufferSize:
        w.u32(0);
        w.u32(kMaxCommandBytes);
        w.u32(kMaxCommandBytes);
        w.u32(kMaxCommandBytes);
        break;
      default:  // CMD_HASH_START/DATA/END (no DRTM sequence is modelled), CMD_CANCEL, CMD_STORE_VOLATILE
        w.u32(0);
        break;
    }
    auto answer = w.finish();
    return {answer.ok() ? std::move(*answer) : result(kResultFail), false};
  }

  bool carries_commands() const override { return false; }

 private:
  ControlFraming framing_;
};

}  // namespace

std::unique_ptr<Channel> swtpm_control_channel(ControlFraming framing) {
  return std::make_unique<SwtpmControl>(framing);
}

}  // namespace tpmsec::emulation
