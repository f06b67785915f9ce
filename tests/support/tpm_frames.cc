#include "support/tpm_frames.h"

#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wire.h"

namespace tpmsec::testing {
namespace {

constexpr size_t kMaxSessions = 3;

SessionEntry owned(const AuthEntry& e) {
  return SessionEntry{e.handle, Bytes(e.nonce.begin(), e.nonce.end()), e.attributes,
                      Bytes(e.hmac.begin(), e.hmac.end())};
}

void write_entry(Writer& w, const SessionEntry& e, bool with_handle) {
  if (with_handle) w.u32(e.handle);
  w.tpm2b(e.nonce, "nonce");
  w.u8(e.attributes);
  w.tpm2b(e.hmac, "hmac");
}

}  // namespace

Result<CommandFrame> parse_command(ByteView bytes) {
  TPMSEC_ASSIGN_OR_RETURN(CommandAreas areas, read_command_areas(bytes, bytes.size(), kMaxSessions));
  CommandFrame f;
  f.code = areas.info->code;
  f.handles = std::move(areas.handles);
  for (const AuthEntry& e : areas.sessions) f.sessions.push_back(owned(e));
  f.parameters.assign(areas.parameters.begin(), areas.parameters.end());
  return f;
}

Bytes password_command(uint32_t code, std::vector<uint32_t> handles, Bytes parameters) {
  CommandFrame f;
  f.code = code;
  f.handles = std::move(handles);
  SessionEntry pw;
  pw.handle = rh::kPasswordSession;
  pw.attributes = attr::kContinueSession;
  f.sessions.push_back(pw);
  f.parameters = std::move(parameters);
  return build_command(f);
}

Bytes build_command(const CommandFrame& f) {
  Writer w;
  w.u16(f.sessions.empty() ? st::kNoSessions : st::kSessions);
  Writer::SizeMark size = w.begin_total_size32("commandSize");
  w.u32(f.code);
  for (uint32_t h : f.handles) w.u32(h);
  if (!f.sessions.empty()) {
    Writer::SizeMark area = w.begin_size32("authorizationSize");
    for (const SessionEntry& e : f.sessions) write_entry(w, e, true);
    w.end_size(area);
  }
  w.bytes(f.parameters);
  w.end_size(size);
  return *w.finish();
}

Result<ResponseFrame> parse_response(ByteView bytes, uint32_t command_code) {
  const CommandInfo* info = find_command(command_code);
  if (!info) return parse_error(fmt::format("command 0x{:x} is not in the command table", command_code));
  TPMSEC_ASSIGN_OR_RETURN(ResponseAreas areas,
                          read_response_areas(bytes, info->response_handle_count, bytes.size(), kMaxSessions));
  ResponseFrame f;
  f.code = areas.header.code;
  f.handles = std::move(areas.handles);
  f.parameters.assign(areas.parameters.begin(), areas.parameters.end());
  for (const AuthEntry& e : areas.sessions) f.sessions.push_back(owned(e));
  return f;
}

Bytes build_response(const ResponseFrame& f) {
  Writer w;
  bool sessions = f.code == rc::kSuccess && !f.sessions.empty();
  w.u16(sessions ? st::kSessions : st::kNoSessions);
  Writer::SizeMark size = w.begin_total_size32("responseSize");
  w.u32(f.code);
  if (f.code == rc::kSuccess) {
    for (uint32_t h : f.handles) w.u32(h);
    if (sessions) {
      w.u32(static_cast<uint32_t>(f.parameters.size()));
      w.bytes(f.parameters);
      for (const SessionEntry& e : f.sessions) write_entry(w, e, false);
    } else {
      w.bytes(f.parameters);
    }
  }
  w.end_size(size);
  return *w.finish();
}

uint32_t response_code_of(ByteView response) {
  HeaderRead hr = read_frame_header(response, response.size());
  return hr.check == FrameCheck::kIncomplete ? 0 : hr.header.code;
}

SessionEntry password_response_entry() {
  SessionEntry e;
  e.attributes = attr::kContinueSession;
  return e;
}

}  // namespace tpmsec::testing
