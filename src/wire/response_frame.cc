#include "tpmsec/response_frame.h"

#include <fmt/format.h>

#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// The header of `frame`, which must frame it exactly.
Result<FrameHeader> whole_response(ByteView frame, size_t max_size) {
  HeaderRead hr = read_frame_header(frame, max_size);
  if (hr.check != FrameCheck::kOk || hr.header.size != frame.size()) {
    return parse_error(fmt::format("a response of {} bytes whose header does not frame it", frame.size()));
  }
  return hr.header;
}

}  // namespace

Result<std::vector<uint32_t>> read_response_handles(ByteView frame, uint8_t handle_count, size_t max_size) {
  TPMSEC_ASSIGN_OR_RETURN(FrameHeader header, whole_response(frame, max_size));
  if (header.code != rc::kSuccess) return parse_error("an error response has no handle area");
  Reader r(frame.subspan(kFrameHeaderBytes), kFrameHeaderBytes);
  std::vector<uint32_t> handles;
  for (int i = 0; i < handle_count; ++i) handles.push_back(r.u32("response handle"));
  if (!r.ok()) return r.status().error();
  return handles;
}

Result<ResponseAreas> read_response_areas(ByteView frame, uint8_t handle_count, size_t max_size, size_t max_sessions) {
  ResponseAreas a;
  TPMSEC_ASSIGN_OR_RETURN(a.header, whole_response(frame, max_size));
  if (a.header.code != rc::kSuccess) {
    if (frame.size() != kFrameHeaderBytes) {
      return parse_error(fmt::format("error {} carries {} unexpected bytes", describe_rc(a.header.code),
                                     frame.size() - kFrameHeaderBytes));
    }
    return a;
  }
  Reader r(frame.subspan(kFrameHeaderBytes), kFrameHeaderBytes);
  for (int i = 0; i < handle_count; ++i) a.handles.push_back(r.u32("response handle"));
  if (a.header.tag != st::kSessions) {
    a.parameters = r.rest();
    if (!r.ok()) return r.status().error();
    return a;
  }
  uint32_t param_size = r.u32("parameterSize");
  if (r.ok() && param_size > r.remaining()) {
    r.fail(fmt::format("parameterSize {} exceeds the {} bytes left", param_size, r.remaining()));
  }
  a.parameters = r.bytes(param_size, "response parameters");
  while (r.ok() && r.remaining() > 0 && a.sessions.size() <= max_sessions) {
    size_t left = r.remaining();
    Reader entry = r;
    AuthEntry e = read_auth_entry(entry, frame, /*command=*/false);
    if (!entry.ok() && !a.sessions.empty()) {
      // What follows the last whole entry is not one.
      return parse_error(fmt::format("{} unexpected trailing bytes after {} session entr{}", left, a.sessions.size(),
                                     a.sessions.size() == 1 ? "y" : "ies"));
    }
    r = entry;
    a.sessions.push_back(e);
  }
  if (!r.ok()) return r.status().error();
  if (a.sessions.empty()) return parse_error("a session area with no session");
  if (a.sessions.size() > max_sessions) return parse_error(fmt::format("more than {} sessions", max_sessions));
  return a;
}

Result<Bytes> write_response_frame(uint32_t code, std::span<const uint32_t> handles, ByteView parameters,
                                   std::span<const ByteView> sessions, size_t max_size) {
  Writer w(max_size, "response");
  w.u16(sessions.empty() ? st::kNoSessions : st::kSessions);
  auto size_mark = w.begin_total_size32("responseSize");
  w.u32(code);
  for (uint32_t h : handles) w.u32(h);
  if (sessions.empty()) {
    w.bytes(parameters, "parameters");
  } else {
    auto param_mark = w.begin_size32("parameterSize");
    w.bytes(parameters, "parameters");
    w.end_size(param_mark);
    for (ByteView entry : sessions) w.bytes(entry, "TPMS_AUTH_RESPONSE");
  }
  w.end_size(size_mark);
  return w.finish();
}

}  // namespace tpmsec
