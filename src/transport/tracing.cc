#include "tpmsec/transport/tracing.h"

#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_header.h"
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
  HeaderRead answer = read_frame_header(response, response.size());
  if (answer.check != FrameCheck::kIncomplete) s.response_code = answer.header.code;
  HeaderRead hr = read_frame_header(command, command.size());
  if (hr.check != FrameCheck::kOk) return s;
  s.command_code = hr.header.code;
  // The areas by the library's one frame codec; a frame it cannot split is
  // traced by its code alone (the TPM refuses it anyway).
  auto areas = read_command_areas(command, command.size());
  if (!areas.ok()) return s;
  if (!areas->handles.empty()) s.first_handle = areas->handles[0];
  for (const AuthEntry& e : areas->sessions) {
    ++s.session_count;
    s.session_attributes |= e.attributes;
    if (e.handle != rh::kPasswordSession) s.hmac_session = true;
  }
  const ByteView params = areas->parameters;
  if (s.command_code == cc::kStartAuthSession) {  // tpmKey, bind, nonceCaller, encryptedSalt
    s.salted = s.first_handle != rh::kNull;
    s.encrypted_salt_bytes = read_start_auth_session(params).encrypted_salt.size();
  } else if (s.command_code == cc::kContextLoad) {
    s.context_handle = read_context_saved_handle(params).value_or(0);
  } else if (s.command_code == cc::kContextSave) {
    s.context_handle = s.first_handle;
  } else if (s.command_code == cc::kFlushContext) {
    s.context_handle = read_flush_handle(params).value_or(0);
  } else if (s.command_code == cc::kCreatePrimary) {
    // inSensitive (its data may be encrypted, not its size), inPublic
    Reader r(params);
    r.tpm2b("inSensitive");
    r.u16("inPublic size");
    uint16_t type = r.u16("inPublic type");
    if (r.ok()) s.object_type = type;
  }
  return s;
}

Result<Bytes> TracingTransport::transmit(ByteView command) {
  int64_t start = clock_.now_ns();
  auto response = inner().transmit(command);
  int64_t end = clock_.now_ns();
  TraceRecord rec;
  rec.shape = shape_of(command, response.ok() ? ByteView(*response) : ByteView());
  rec.start_ns = start;
  rec.duration_ns = end - start;
  if (sink_) sink_(rec);
  return response;
}

}  // namespace tpmsec
