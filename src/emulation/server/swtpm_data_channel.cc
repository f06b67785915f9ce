// swtpm's data channel: the raw TPM command, the raw response.
#include <fmt/format.h>

#include "emulation/server/channel.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"

namespace tpmsec::emulation {
namespace {

class SwtpmData final : public Channel {
 public:
  Parse parse(ByteView buffered) const override {
    HeaderRead h = read_frame_header(buffered, kMaxCommandBytes);
    switch (h.check) {
      case FrameCheck::kIncomplete:
        return Parse::more(kFrameHeaderBytes - buffered.size());
      case FrameCheck::kBadTag:
      case FrameCheck::kBadSize:
        return Parse::refuse(error_frame(h.check == FrameCheck::kBadTag ? rc::kBadTag : rc::kCommandSize),
                             fmt::format("malformed command frame (tag 0x{:04x}, size {}): error response, "
                                         "connection closed",
                                         h.header.tag, h.header.size));
      case FrameCheck::kOk:
        break;
    }
    if (buffered.size() < h.header.size) return Parse::more(h.header.size - buffered.size());
    return Parse::request();
  }

  // A frame cut short gets no answer: the client is gone or lost its framing.
  Parse truncated(ByteView) const override { return Parse::refuse({}, ""); }

  Served serve(ByteView request, ChipPort& chip) const override { return {chip.execute(request), false}; }

  bool carries_commands() const override { return true; }
};

}  // namespace

std::unique_ptr<Channel> swtpm_data_channel() { return std::make_unique<SwtpmData>(); }

}  // namespace tpmsec::emulation
