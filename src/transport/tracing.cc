#include "tpmsec/transport/tracing.h"

#include <fmt/format.h>

#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec {

std::string command_name(uint32_t command_code) {
  const CommandInfo* k = find_command(command_code);
  return k ? std::string(k->name) : fmt::format("0x{:03x}", command_code);
}

CommandShape shape_of(ByteView command, ByteView response) {
  CommandShape s;
  s.command_bytes = command.size();
  s.response_bytes = response.size();
  if (response.size() >= 10) s.response_code = load_be32(response.data() + 6);
  Reader r(command);
  uint16_t tag = r.u16("tag");
  r.u32("size");
  s.command_code = r.u32("code");
  if (!r.ok()) return s;
  const CommandInfo* k = find_command(s.command_code);
  uint8_t handles = k ? k->handle_count : 0;
  for (uint8_t i = 0; i < handles; ++i) {
    uint32_t h = r.u32("handle");
    if (i == 0) s.first_handle = h;
  }
  if (tag == st::kSessions) {
    Reader area = r.sub(r.u32("authorizationSize"), "authorization area");
    while (area.ok() && area.remaining() > 0 && s.session_count < 3) {
      uint32_t h = area.u32("session handle");
      area.tpm2b("nonce");
      uint8_t attrs = area.u8("attributes");
      area.tpm2b("hmac");
      if (!area.ok()) break;
      ++s.session_count;
      s.session_attributes |= attrs;
      if (h != rh::kPasswordSession) s.hmac_session = true;
    }
  }
  if (s.command_code == cmd::StartAuthSession::kInfo.code) {  // tpmKey, bind, nonceCaller, encryptedSalt
    s.salted = s.first_handle != rh::kNull;
    r.tpm2b("nonceCaller");
    s.encrypted_salt_bytes = r.tpm2b("encryptedSalt").size();
  } else if (s.command_code == cmd::ContextLoad::kInfo.code) {  // sequence, savedHandle
    r.u64("sequence");
    s.context_handle = r.u32("savedHandle");
  } else if (s.command_code == cmd::ContextSave::kInfo.code) {
    s.context_handle = s.first_handle;
  } else if (s.command_code == cmd::FlushContext::kInfo.code) {
    s.context_handle = r.u32("flushHandle");
  } else if (s.command_code == cmd::CreatePrimary::kInfo.code) {
    // inSensitive (its data may be encrypted, not its size), inPublic
    r.tpm2b("inSensitive");
    r.u16("inPublic size");
    uint16_t type = r.u16("inPublic type");
    if (r.ok()) s.object_type = type;
  }
  return s;
}

Result<Bytes> TracingTransport::transmit(ByteView command) {
  int64_t start = clock_.now_ns();
  auto response = inner_.transmit(command);
  int64_t end = clock_.now_ns();
  TraceRecord rec;
  rec.shape = shape_of(command, response.ok() ? ByteView(*response) : ByteView());
  rec.start_ns = start;
  rec.duration_ns = end - start;
  if (sink_) sink_(rec);
  return response;
}

}  // namespace tpmsec
