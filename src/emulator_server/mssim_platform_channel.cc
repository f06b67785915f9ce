// mssim's platform port: a u32 signal (power on/off, NV on, reset, ...),
// answered by u32 0.
#include <fmt/format.h>

#include "emulator_server/channel.h"
#include "tpmsec/transport/mssim_protocol.h"
#include "tpmsec/wire.h"

namespace tpmsec::emulation {
namespace {

constexpr size_t kSignal = 4;

class MssimPlatform final : public Channel {
 public:
  Parse parse(ByteView buffered) const override {
    if (buffered.size() < kSignal) return Parse::more(kSignal - buffered.size());
    return Parse::request();
  }

  Parse truncated(ByteView) const override { return Parse::refuse({}, ""); }

  Served serve(ByteView request, ChipPort& chip) const override {
    const uint32_t code = load_be32(request.data());
    switch (code) {
      case mssim::kPowerOn:
        if (!chip.powered()) {
          Status s = chip.tpm_init(false);
          chip.log(s.ok() ? "platform: power on (_TPM_Init)" : "platform: power on failed: " + s.error().message());
        }
        return {be32(0), false};
      case mssim::kPowerOff:
        chip.power_off();
        chip.log("platform: power off");
        return {be32(0), false};
      case mssim::kReset:
      case mssim::kRestart: {
        Status s = chip.tpm_init(false);
        chip.log(s.ok() ? "platform: reset (_TPM_Init)" : "platform: reset failed: " + s.error().message());
        return {be32(0), false};
      }
      case mssim::kPhysPresOn:
      case mssim::kPhysPresOff:
      case mssim::kCancelOn:
      case mssim::kCancelOff:
      case mssim::kNvOn:
      case mssim::kNvOff:
      case mssim::kKeyCacheOn:
      case mssim::kKeyCacheOff:
        return {be32(0), false};
      case mssim::kSessionEnd:
        return {{}, true};  // no answer: the client closes
      case mssim::kStop:
        chip.log("platform: TPM_STOP: stopping");
        chip.stop_serving();
        return {be32(0), true};
      default:
        chip.log(fmt::format("platform: unknown signal {}: connection closed", code));
        return {{}, true};
    }
  }

  bool carries_commands() const override { return false; }
};

}  // namespace

std::unique_ptr<Channel> mssim_platform_channel() { return std::make_unique<MssimPlatform>(); }

}  // namespace tpmsec::emulation
