#include "soak/frames.h"

#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec::soak {
namespace {

constexpr uint16_t kNoSessions = 0x8001, kSessions = 0x8002;

// A frame: tag, size, code, handles, the password session if `password`,
// then the parameters. The frames are the bench's own, far under any limit.
Bytes frame(uint32_t code, std::initializer_list<uint32_t> handles, bool password, ByteView params) {
  Writer w;
  w.u16(password ? kSessions : kNoSessions);
  auto size = w.begin_total_size32("commandSize");
  w.u32(code);
  for (uint32_t h : handles) w.u32(h);
  if (password) {
    w.u32(9);  // authorizationSize: one TPMS_AUTH_COMMAND with empty nonce and hmac
    w.u32(rh::kPasswordSession);
    w.u16(0);
    w.u8(0x01);  // continueSession
    w.u16(0);
  }
  w.bytes(params);
  w.end_size(size);
  return *w.finish();
}

Bytes params(void (*fill)(Writer&)) {
  Writer w;
  fill(w);
  return *w.finish();
}

// TPM2B_SENSITIVE_CREATE with an empty userAuth and `data`.
void sensitive(Writer& w, ByteView data) {
  auto size = w.begin_size16("inSensitive");
  w.u16(0);
  w.tpm2b(data, "data");
  w.end_size(size);
}

// outsideInfo and creationPCR, both empty.
void no_creation_data(Writer& w) {
  w.u16(0);
  w.u32(0);
}

}  // namespace

Bytes get_random(uint16_t bytes) {
  Writer w;
  w.u16(bytes);
  return frame(cc::kGetRandom, {}, false, *w.finish());
}

Bytes pcr_read() {
  return frame(cc::kPcrRead, {}, false, params([](Writer& w) {
                 w.u32(1);
                 w.u16(alg::kSha256);
                 w.u8(3);
                 w.u8(0xff);
                 w.u8(0);
                 w.u8(0);
               }));
}

Bytes create_primary() {
  return frame(cc::kCreatePrimary, {rh::kOwner}, true, params([](Writer& w) {
                 sensitive(w, {});
                 auto size = w.begin_size16("inPublic");
                 w.u16(alg::kEcc);
                 w.u16(alg::kSha256);
                 w.u32(0x00030472);  // fixedTPM fixedParent sensitiveDataOrigin userWithAuth noDA restricted decrypt
                 w.u16(0);           // authPolicy
                 w.u16(alg::kAes);
                 w.u16(128);
                 w.u16(alg::kCfb);
                 w.u16(alg::kNull);  // scheme
                 w.u16(curve::kNistP256);
                 w.u16(alg::kNull);  // kdf
                 w.u16(0);           // unique.x
                 w.u16(0);           // unique.y
                 w.end_size(size);
                 no_creation_data(w);
               }));
}

Bytes create_sealed(uint32_t parent) {
  return frame(cc::kCreate, {parent}, true, params([](Writer& w) {
                 const uint8_t secret[] = {'s', 'o', 'a', 'k'};
                 sensitive(w, secret);
                 auto size = w.begin_size16("inPublic");
                 w.u16(alg::kKeyedHash);
                 w.u16(alg::kSha256);
                 w.u32(0x00000052);  // fixedTPM fixedParent userWithAuth
                 w.u16(0);           // authPolicy
                 w.u16(alg::kNull);  // scheme
                 w.u16(0);           // unique
                 w.end_size(size);
                 no_creation_data(w);
               }));
}

Bytes load(uint32_t parent, ByteView created) {
  // Create's response: header, parameterSize, outPrivate, outPublic, ...
  Reader r(created);
  r.bytes(14, "header and parameterSize");
  ByteView priv = r.tpm2b("outPrivate");
  ByteView pub = r.tpm2b("outPublic");
  Writer w;
  w.tpm2b(priv, "inPrivate");
  w.tpm2b(pub, "inPublic");
  return frame(cc::kLoad, {parent}, true, r.ok() ? *w.finish() : Bytes{});
}

Bytes flush_context(uint32_t handle) { return frame(cc::kFlushContext, {}, false, be32(handle)); }

Bytes start_hmac_session() {
  return frame(cc::kStartAuthSession, {rh::kNull, rh::kNull}, false, params([](Writer& w) {
                 w.tpm2b(Bytes(16, 0x3c), "nonceCaller");
                 w.u16(0);  // encryptedSalt
                 w.u8(0);   // TPM_SE_HMAC
                 w.u16(alg::kNull);
                 w.u16(alg::kSha256);
               }));
}

Bytes context_save(uint32_t handle) { return frame(cc::kContextSave, {handle}, false, {}); }

Bytes context_load(ByteView saved) {
  return frame(cc::kContextLoad, {}, false, saved.size() > 10 ? saved.subspan(10) : ByteView());
}

Bytes get_handles(uint32_t first) {
  Writer w;
  w.u32(cap::kHandles);
  w.u32(first);
  w.u32(64);
  return frame(cc::kGetCapability, {}, false, *w.finish());
}

std::optional<uint32_t> response_code(ByteView response) {
  if (response.size() < 10 || load_be32(response.data() + 2) != response.size()) return std::nullopt;
  return load_be32(response.data() + 6);
}

uint32_t response_handle(ByteView response) {
  return response.size() >= 14 && response_code(response) == 0u ? load_be32(response.data() + 10) : 0;
}

std::optional<std::vector<uint32_t>> listed_handles(ByteView response) {
  if (response_code(response) != 0u) return std::nullopt;
  Reader r(response.subspan(10));
  r.u8("moreData");
  if (r.u32("capability") != cap::kHandles) return std::nullopt;
  std::vector<uint32_t> handles(r.count("handles", 64));
  for (uint32_t& h : handles) h = r.u32("handle");
  return r.ok() ? std::optional(handles) : std::nullopt;
}

}  // namespace tpmsec::soak
