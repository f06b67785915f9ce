#include "tpmsec-server/protected_server/status.h"

#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wire.h"

namespace tpmsec::serve {

Bytes status_request() {
  auto frame = write_command_frame(kStatusCommandCode, {}, {}, {}, kMaxCommandBytes);
  return frame.ok() ? std::move(*frame) : Bytes();
}

bool is_status_request(ByteView command) {
  if (command.size() != kFrameHeaderBytes) return false;
  HeaderRead h = read_frame_header(command, kFrameHeaderBytes);
  return h.check == FrameCheck::kOk && h.header.tag == st::kNoSessions && h.header.size == kFrameHeaderBytes &&
         h.header.code == kStatusCommandCode;
}

Result<Bytes> status_response(std::string_view json) {
  Writer w(kMaxStatusBytes, "the status");
  w.tpm2b(ByteView(reinterpret_cast<const uint8_t*>(json.data()), json.size()), "the status");
  TPMSEC_ASSIGN_OR_RETURN(Bytes body, w.finish());
  return write_response_frame(rc::kSuccess, {}, body, {}, kFrameHeaderBytes + 2 + kMaxStatusBytes);
}

Result<std::string> read_status_response(ByteView response) {
  HeaderRead h = read_frame_header(response, kFrameHeaderBytes + 2 + kMaxStatusBytes);
  if (h.check != FrameCheck::kOk || h.header.size != response.size()) {
    return parse_error("the server's status answer is not a whole response frame");
  }
  if (h.header.code != rc::kSuccess) {
    return Error(ErrorKind::kTpm, fmt::format("the server refused the status request (0x{:x})", h.header.code),
                 h.header.code);
  }
  TPMSEC_ASSIGN_OR_RETURN(ResponseAreas areas, read_response_areas(response, 0, response.size()));
  Reader r(areas.parameters);
  ByteView json = r.tpm2b("status", kMaxStatusBytes);
  if (!r.ok() || r.remaining() != 0) return parse_error("the server's status answer does not hold one TPM2B");
  return std::string(json.begin(), json.end());
}

}  // namespace tpmsec::serve
