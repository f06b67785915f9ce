// mssim's TPM port: u32 TPM_SEND_COMMAND (8), u8 locality, u32 size, the
// command; answered by u32 size, the response, u32 0. TPM_SESSION_END (20)
// ends a connection.
#include <fmt/format.h>

#include "emulator_server/channel.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/transport/mssim_protocol.h"
#include "tpmsec/wire.h"

namespace tpmsec::emulation {
namespace {

constexpr size_t kCode = 4;
constexpr size_t kHead = kCode + 1 + 4;  // code, locality, size

class MssimTpm final : public Channel {
 public:
  Parse parse(ByteView buffered) const override {
    if (buffered.size() < kCode) return Parse::more(kCode - buffered.size());
    const uint32_t code = load_be32(buffered.data());
    if (code == mssim::kSessionEnd) return Parse::request();
    if (code != mssim::kSendCommand) {
      return Parse::refuse({}, fmt::format("mssim TPM port: unsupported code {}: connection closed", code));
    }
    if (buffered.size() < kHead) return Parse::more(kHead - buffered.size());
    const uint8_t locality = buffered[kCode];
    const uint32_t size = load_be32(buffered.data() + kCode + 1);
    if (size < kFrameHeaderBytes || size > kMaxCommandBytes || locality > 4) {
      return Parse::refuse(
          {}, fmt::format("malformed mssim frame (size {}, locality {}): connection closed", size, locality));
    }
    if (buffered.size() < kHead + size) return Parse::more(kHead + size - buffered.size());
    return Parse::request();
  }

  Parse truncated(ByteView) const override { return Parse::refuse({}, ""); }

  Served serve(ByteView request, ChipPort& chip) const override {
    if (load_be32(request.data()) == mssim::kSessionEnd) return {{}, true};
    Bytes response = chip.execute_at(request.subspan(kHead), request[kCode]);
    Writer w;
    w.u32(static_cast<uint32_t>(response.size()));
    w.bytes(response);
    w.u32(0);
    auto framed = w.finish();
    if (!framed.ok()) return {{}, true};
    return {std::move(*framed), false};
  }

  bool carries_commands() const override { return true; }
};

}  // namespace

std::unique_ptr<Channel> mssim_tpm_channel() { return std::make_unique<MssimTpm>(); }

}  // namespace tpmsec::emulation
