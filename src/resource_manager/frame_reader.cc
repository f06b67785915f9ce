// The raw TPM protocol's frame reading (/dev/tpmrm0, swtpm's data channel):
// the header first, its size bounded by the client's limit before a byte of
// the body is read. The one place this layer reads a client's framing (to be
// switched to the core's frame codec when it has one for both directions).
#include <fmt/format.h>

#include "tpmsec-server/resource_manager/protocol.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"

namespace tpmsec::server {
namespace {

class RawTpm final : public Protocol {
 public:
  Parse parse(ByteView buffered, size_t max_frame) const override {
    HeaderRead h = read_frame_header(buffered, max_frame);
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

  Served serve(ByteView request, ClientPort& port) const override { return {port.execute(request), false}; }

  bool carries_commands() const override { return true; }
};

}  // namespace

std::shared_ptr<const Protocol> raw_tpm_protocol() {
  static const auto protocol = std::make_shared<const RawTpm>();
  return protocol;
}

}  // namespace tpmsec::server
