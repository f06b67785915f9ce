#include "tpmsec/command_frame.h"

#include <fmt/format.h>

#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"

namespace tpmsec {

AuthEntry read_auth_entry(Reader& r, ByteView frame, bool command) {
  AuthEntry e;
  size_t start = r.offset();
  if (command) e.handle = r.u32("TPMS_AUTH_COMMAND.sessionHandle");
  e.nonce = r.tpm2b("nonce", 64);
  e.attributes = r.u8("sessionAttributes");
  e.hmac = r.tpm2b("hmac", 64);
  if (r.ok()) e.raw = frame.subspan(start, r.offset() - start);
  return e;
}

Result<Bytes> write_auth_entry(const AuthEntry& entry, bool command) {
  Writer w;
  w.reserve((command ? 4 : 0) + 2 + entry.nonce.size() + 1 + 2 + entry.hmac.size());
  if (command) w.u32(entry.handle);
  w.tpm2b(entry.nonce, "nonce", 64);
  w.u8(entry.attributes);
  w.tpm2b(entry.hmac, "hmac", 64);
  return w.finish();
}

Result<CommandAreas> read_command_areas(ByteView frame, size_t max_size, size_t max_sessions) {
  HeaderRead hr = read_frame_header(frame, max_size);
  if (hr.check != FrameCheck::kOk || hr.header.size != frame.size()) {
    return parse_error(fmt::format("a command frame of {} bytes whose header does not frame it", frame.size()));
  }
  CommandAreas a;
  a.info = find_command(hr.header.code);
  if (!a.info)
    return unsupported_error(fmt::format("command code 0x{:08x} is not in the command table", hr.header.code));
  Reader r(frame.subspan(kFrameHeaderBytes), kFrameHeaderBytes);
  for (int i = 0; i < a.info->handle_count; ++i) a.handles.push_back(r.u32("handle"));
  if (hr.header.tag == st::kSessions) {
    uint32_t auth_size = r.u32("authorizationSize");
    if (r.ok() && auth_size > r.remaining()) r.fail("authorizationSize exceeds the command");
    Reader s = r.sub(auth_size, "authorization area");
    while (s.ok() && s.remaining() > 0 && a.sessions.size() <= max_sessions) {
      a.sessions.push_back(read_auth_entry(s, frame, /*command=*/true));
    }
    if (!s.ok()) return s.status().error().with_context(std::string(a.info->name) + " authorization area");
    if (a.sessions.empty()) return parse_error(fmt::format("{}: a session area with no session", a.info->name));
    if (a.sessions.size() > max_sessions) {
      return parse_error(fmt::format("{}: more than {} sessions", a.info->name, max_sessions));
    }
  }
  a.parameters = r.rest();
  if (!r.ok()) return r.status().error().with_context(std::string(a.info->name) + " command");
  return a;
}

Result<Bytes> write_command_frame(uint32_t code, std::span<const uint32_t> handles, std::span<const ByteView> sessions,
                                  ByteView parameters, size_t max_size) {
  Writer w(max_size, "command");
  size_t size = kFrameHeaderBytes + 4 * handles.size() + parameters.size();
  if (!sessions.empty()) size += 4;  // authorizationSize
  for (ByteView entry : sessions) size += entry.size();
  w.reserve(size);
  w.u16(sessions.empty() ? st::kNoSessions : st::kSessions);
  auto size_mark = w.begin_total_size32("commandSize");
  w.u32(code);
  for (uint32_t h : handles) w.u32(h);
  if (!sessions.empty()) {
    auto auth_mark = w.begin_size32("authorizationSize");
    for (ByteView entry : sessions) w.bytes(entry, "TPMS_AUTH_COMMAND");
    w.end_size(auth_mark);
  }
  w.bytes(parameters, "parameters");
  w.end_size(size_mark);
  return w.finish();
}

}  // namespace tpmsec
