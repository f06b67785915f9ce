#include "tpmsec/frame_fields.h"

#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec {

StartAuthSessionRequest read_start_auth_session(ByteView parameters) {
  StartAuthSessionRequest q;
  Reader r(parameters);
  q.nonce_caller = r.tpm2b("nonceCaller");
  q.encrypted_salt = r.tpm2b("encryptedSalt");
  q.session_type = r.u8("sessionType");
  q.symmetric = r.u16("symmetric.algorithm");
  if (q.symmetric != alg::kNull) r.u16("symmetric.keyBits");
  if (q.symmetric != alg::kNull && q.symmetric != alg::kXor) r.u16("symmetric.mode");
  q.auth_hash = r.u16("authHash");
  q.complete = r.ok() && q.nonce_caller.size() <= 64;
  return q;
}

std::optional<ByteView> read_start_auth_session_nonce(ByteView parameters) {
  Reader r(parameters);
  ByteView nonce = r.tpm2b("nonceTPM", 64);
  if (!r.ok()) return std::nullopt;
  return nonce;
}

std::optional<uint32_t> read_context_saved_handle(ByteView parameters) {
  Reader r(parameters);
  r.u64("TPMS_CONTEXT.sequence");
  uint32_t handle = r.u32("TPMS_CONTEXT.savedHandle");
  if (!r.ok()) return std::nullopt;
  return handle;
}

uint32_t whole_context_saved_handle(ByteView context) {
  Reader r(context);
  r.u64("TPMS_CONTEXT.sequence");
  const uint32_t handle = r.u32("TPMS_CONTEXT.savedHandle");
  r.u32("TPMS_CONTEXT.hierarchy");
  r.tpm2b("TPMS_CONTEXT.contextBlob");
  return r.ok() && r.remaining() == 0 ? handle : 0;
}

std::optional<uint32_t> read_flush_handle(ByteView parameters) {
  Reader r(parameters);
  uint32_t handle = r.u32("flushHandle");
  if (!r.ok()) return std::nullopt;
  return handle;
}

std::optional<HandleListing> read_handle_listing(ByteView parameters) {
  Reader r(parameters);
  HandleListing out;
  out.more_data = r.u8("moreData");
  uint32_t capability = r.u32("capability");
  if (!r.ok() || capability != cap::kHandles) return std::nullopt;
  uint32_t count = r.u32("count");
  if (!r.ok() || count > r.remaining() / 4) return std::nullopt;
  out.handles.reserve(count);
  for (uint32_t i = 0; i < count; ++i) out.handles.push_back(r.u32("handle"));
  r.expect_end("GetCapability response");
  if (!r.ok()) return std::nullopt;
  return out;
}

bool asks_own_handles(ByteView parameters) {
  Reader r(parameters);
  const uint32_t capability = r.u32("capability");
  const uint32_t property = r.u32("property");
  if (!r.ok() || capability != cap::kHandles) return false;
  const uint8_t type = static_cast<uint8_t>(property >> 24);
  return type == ht::kTransient || type == ht::kHmacSession || type == ht::kPolicySession;
}

Result<Bytes> write_handle_listing(const HandleListing& listing) {
  Writer w;
  w.u8(listing.more_data);
  w.u32(cap::kHandles);
  w.u32(static_cast<uint32_t>(listing.handles.size()));
  for (uint32_t h : listing.handles) w.u32(h);
  return w.finish();
}

std::optional<Bytes> name_in_response(uint32_t code, ByteView parameters) {
  Reader r(parameters);
  switch (code) {
    case cc::kCreatePrimary:
      r.tpm2b("outPublic");
      r.tpm2b("creationData");
      r.tpm2b("creationHash");
      r.u16("creationTicket.tag");
      r.u32("creationTicket.hierarchy");
      r.tpm2b("creationTicket.digest");
      break;
    case cc::kLoad:
    case cc::kLoadExternal:
      break;
    case cc::kCreateLoaded:
      r.tpm2b("outPrivate");
      r.tpm2b("outPublic");
      break;
    case cc::kReadPublic:
    case cc::kNvReadPublic:
      r.tpm2b("public area");
      break;
    default:
      return std::nullopt;
  }
  ByteView name = r.tpm2b("name", 2 + 64);
  if (!r.ok() || name.size() < 2 + 20) return std::nullopt;
  return Bytes(name.begin(), name.end());
}

std::optional<ByteView> loaded_public_area(uint32_t code, ByteView parameters) {
  if (code != cc::kLoad && code != cc::kLoadExternal) return std::nullopt;
  Reader r(parameters);
  r.tpm2b("inPrivate");
  ByteView area = r.tpm2b("inPublic");
  if (!r.ok() || area.empty()) return std::nullopt;
  return area;
}

}  // namespace tpmsec
