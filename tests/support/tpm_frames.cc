#include "support/tpm_frames.h"

#include <fmt/format.h>

#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec::testing {
namespace {

constexpr size_t kHeaderSize = 10;
constexpr size_t kMaxSessions = 3;

SessionEntry read_entry(Reader& r, bool with_handle) {
  SessionEntry e;
  if (with_handle) e.handle = r.u32("session handle");
  ByteView nonce = r.tpm2b("nonce", 64);
  e.nonce.assign(nonce.begin(), nonce.end());
  e.attributes = r.u8("sessionAttributes");
  ByteView hmac = r.tpm2b("hmac", 64);
  e.hmac.assign(hmac.begin(), hmac.end());
  return e;
}

void write_entry(Writer& w, const SessionEntry& e, bool with_handle) {
  if (with_handle) w.u32(e.handle);
  w.tpm2b(e.nonce, "nonce");
  w.u8(e.attributes);
  w.tpm2b(e.hmac, "hmac");
}

}  // namespace

Result<CommandFrame> parse_command(ByteView bytes) {
  Reader r(bytes);
  uint16_t tag = r.u16("tag");
  uint32_t size = r.u32("commandSize");
  CommandFrame f;
  f.code = r.u32("commandCode");
  TPMSEC_RETURN_IF_ERROR(r.status());
  if (size != bytes.size()) return parse_error(fmt::format("command size field {} for {} bytes", size, bytes.size()));
  const CommandInfo* info = find_command(f.code);
  if (!info) return parse_error(fmt::format("command 0x{:x} is not in the command table", f.code));
  for (int i = 0; i < info->handle_count; ++i) f.handles.push_back(r.u32("handle"));
  if (tag == st::kSessions) {
    Reader area = r.sub(r.u32("authorizationSize"), "authorization area");
    while (area.ok() && area.remaining() > 0) {
      if (f.sessions.size() == kMaxSessions) area.fail("more than three sessions");
      f.sessions.push_back(read_entry(area, true));
    }
    r.absorb(area);
  } else if (tag != st::kNoSessions) {
    r.fail(fmt::format("tag 0x{:04x}", tag));
  }
  ByteView params = r.rest();
  f.parameters.assign(params.begin(), params.end());
  TPMSEC_RETURN_IF_ERROR(r.status());
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
  Reader r(bytes);
  uint16_t tag = r.u16("tag");
  uint32_t size = r.u32("responseSize");
  ResponseFrame f;
  f.code = r.u32("responseCode");
  TPMSEC_RETURN_IF_ERROR(r.status());
  if (size != bytes.size()) return parse_error(fmt::format("response size field {} for {} bytes", size, bytes.size()));
  if (f.code != rc::kSuccess) {
    if (bytes.size() != kHeaderSize) return parse_error("an error response with a body");
    return f;
  }
  const CommandInfo* info = find_command(command_code);
  if (!info) return parse_error(fmt::format("command 0x{:x} is not in the command table", command_code));
  for (int i = 0; i < info->response_handle_count; ++i) f.handles.push_back(r.u32("handle"));
  if (tag == st::kSessions) {
    ByteView params = r.bytes(r.u32("parameterSize"), "parameters");
    f.parameters.assign(params.begin(), params.end());
    while (r.ok() && r.remaining() > 0) {
      if (f.sessions.size() == kMaxSessions) r.fail("more than three sessions");
      f.sessions.push_back(read_entry(r, false));
    }
  } else if (tag == st::kNoSessions) {
    ByteView params = r.rest();
    f.parameters.assign(params.begin(), params.end());
  } else {
    r.fail(fmt::format("tag 0x{:04x}", tag));
  }
  TPMSEC_RETURN_IF_ERROR(r.status());
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

uint32_t response_code_of(ByteView response) { return response.size() < kHeaderSize ? 0 : load_be32(response.data() + 6); }

SessionEntry password_response_entry() {
  SessionEntry e;
  e.attributes = attr::kContinueSession;
  return e;
}

}  // namespace tpmsec::testing
