#include "wrap/caller_frame.h"

#include <algorithm>

#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"

namespace tpmsec::wrapping {
namespace {

// The caller's distinct sessions a command needs loaded: its session
// entries other than passwords, and the session handles in its handle area.
size_t sessions_loaded_for(std::span<const uint32_t> handles, std::span<const Entry> sessions) {
  std::vector<uint32_t> used;
  auto add = [&](uint32_t h) {
    if (ht::is_session(h) && std::find(used.begin(), used.end(), h) == used.end()) {
      used.push_back(h);
    }
  };
  for (uint32_t h : handles) add(h);
  for (const Entry& e : sessions) add(e.handle);
  return used.size();
}

// The first parameter's bytes carry something: not all zero.
bool carries_something(ByteView parameters) {
  Reader r(parameters);
  ByteView first = r.tpm2b("first parameter");
  return r.ok() && std::any_of(first.begin(), first.end(), [](uint8_t b) { return b != 0; });
}

}  // namespace

SecretParameters secret_first_parameters(uint32_t code) {
  struct Row {
    uint32_t code;
    SecretParameters secret;
  };
  static constexpr SecretParameters kIn{true, false}, kOut{false, true}, kBoth{true, true};
  static constexpr Row kSecrets[] = {
      // The sensitive area of a new object: its authValue and data.
      {command_code("Create"), kIn}, {command_code("CreatePrimary"), kIn}, {command_code("CreateLoaded"), kIn},
      // A private key in clear, an inner wrapper's key, a credential.
      {command_code("LoadExternal"), kIn}, {command_code("Import"), kIn}, {command_code("Duplicate"), kBoth},
      {command_code("MakeCredential"), kIn}, {command_code("ActivateCredential"), kOut},
      // authValues.
      {command_code("NV_DefineSpace"), kIn}, {command_code("HierarchyChangeAuth"), kIn},
      {command_code("ObjectChangeAuth"), kIn}, {command_code("NV_ChangeAuth"), kIn},
      {command_code("PCR_SetAuthValue"), kIn}, {command_code("HashSequenceStart"), kIn},
      {command_code("HMAC_Start"), kIn},
      // Data in and out of the TPM's protection.
      {command_code("NV_Write"), kIn}, {command_code("NV_Read"), kOut}, {command_code("Unseal"), kOut},
      {command_code("GetRandom"), kOut}, {command_code("StirRandom"), kIn},
      {command_code("EncryptDecrypt"), kOut}, {command_code("EncryptDecrypt2"), kBoth},
      {command_code("RSA_Encrypt"), kIn}, {command_code("RSA_Decrypt"), kOut},
      {command_code("ECC_Encrypt"), kIn}, {command_code("ECC_Decrypt"), kOut},
      // Shared secrets.
      {command_code("ECDH_KeyGen"), kOut}, {command_code("ECDH_ZGen"), kOut}, {command_code("ZGen_2Phase"), kOut},
  };
  for (const Row& row : kSecrets) {
    if (row.code == code) return row.secret;
  }
  return {};
}

std::string secret_in_clear(const CommandInfo& info, std::span<const Entry> sessions, ByteView parameters,
                            std::optional<size_t> replaced_password, bool decrypt, bool encrypt) {
  bool caller_decrypts = false, caller_encrypts = false;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Entry& e = sessions[i];
    if (e.handle == rh::kPasswordSession) {
      if (replaced_password != i && !e.hmac.empty()) return "a password in a password session";
      continue;
    }
    caller_decrypts |= (e.attributes & attr::kDecrypt) != 0;
    caller_encrypts |= (e.attributes & attr::kEncrypt) != 0;
  }
  SecretParameters secret = secret_first_parameters(info.code);
  if (secret.command && !decrypt && !caller_decrypts && carries_something(parameters)) {
    return "its first parameter, which no session encrypts";
  }
  if (secret.response && !encrypt && !caller_encrypts) return "its response's first parameter, which no session encrypts";
  return {};
}

std::optional<CommandAreas> read_caller_frame(ByteView command) {
  auto areas = read_command_areas(command, kMaxFrame, kMaxSessions);
  if (!areas.ok() || areas->sessions.size() >= kMaxSessions) return std::nullopt;
  // GetSessionAuditDigest's sessionHandle, PolicySecret's policySession:
  // sessions the TPM must have loaded as much as an entry's.
  if (sessions_loaded_for(areas->handles, areas->sessions) >= kMaxSessions) return std::nullopt;
  return std::move(*areas);
}

std::optional<SlotPlan> plan_slot(std::span<const Entry> sessions, const CommandInfo& info) {
  SlotPlan plan;
  for (size_t i = 0; i < sessions.size(); ++i) {
    if (sessions[i].attributes & attr::kAudit) plan.caller_audits = true;
    if (sessions[i].handle == rh::kPasswordSession) {
      ++plan.passwords;
      if (!plan.password_slot && i < info.auth_count) plan.password_slot = i;
    } else {
      plan.caller_hmac = true;
    }
  }
  if (!plan.password_slot && sessions.size() < info.auth_count) return std::nullopt;
  if (plan.caller_audits && !plan.password_slot) return std::nullopt;
  return plan;
}

uint16_t computable_session_hash(uint32_t code, std::span<const uint32_t> handles, ByteView parameters) {
  if (code != command_code("StartAuthSession") || handles.size() != 2 || handles[0] != rh::kNull ||
      handles[1] != rh::kNull) {
    return 0;
  }
  Reader r(parameters);
  r.tpm2b("nonceCaller", 64);
  ByteView salt = r.tpm2b("encryptedSalt");
  uint8_t type = r.u8("sessionType");
  uint16_t symmetric = r.u16("symmetric.algorithm");
  if (symmetric != alg::kNull) r.u16("symmetric.keyBits");
  if (symmetric != alg::kNull && symmetric != alg::kXor) r.u16("symmetric.mode");
  uint16_t hash = r.u16("authHash");
  // A trial session authorizes nothing (it never stands in a command's
  // session area), so only HMAC and policy sessions are tracked.
  bool authorizes = type == se::kHmac || type == se::kPolicy;
  return r.ok() && salt.empty() && authorizes && digest_size(hash) ? hash : 0;
}

std::optional<Bytes> listing_without(ByteView parameters, uint32_t handle) {
  Reader r(parameters);
  uint8_t more = r.u8("moreData");
  uint32_t capability = r.u32("capability");
  if (!r.ok() || capability != cap::kHandles) return std::nullopt;
  uint32_t count = r.u32("count");
  if (!r.ok() || count > r.remaining() / 4) return std::nullopt;
  std::vector<uint32_t> handles;
  bool found = false;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t h = r.u32("handle");
    if (h == handle) {
      found = true;
    } else {
      handles.push_back(h);
    }
  }
  r.expect_end("GetCapability response");
  if (!r.ok() || !found) return std::nullopt;
  Writer w;
  w.u8(more);
  w.u32(capability);
  w.u32(static_cast<uint32_t>(handles.size()));
  for (uint32_t h : handles) w.u32(h);
  auto out = w.finish();
  if (!out.ok()) return std::nullopt;
  return std::move(*out);
}

Result<Bytes> build_command_frame(uint32_t code, std::span<const uint32_t> handles, std::span<const ByteView> entries,
                                  ByteView parameters) {
  Writer w(kMaxFrame, "command");
  w.u16(st::kSessions);
  auto size_mark = w.begin_total_size32("commandSize");
  w.u32(code);
  for (uint32_t h : handles) w.u32(h);
  auto auth_mark = w.begin_size32("authorizationSize");
  for (ByteView entry : entries) w.bytes(entry, "TPMS_AUTH_COMMAND");
  w.end_size(auth_mark);
  w.bytes(parameters, "parameters");
  w.end_size(size_mark);
  return w.finish();
}

}  // namespace tpmsec::wrapping
