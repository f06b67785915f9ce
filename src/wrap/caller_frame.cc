#include "wrap/caller_frame.h"

#include <algorithm>

#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"

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
      {cc::kCreate, kIn},
      {cc::kCreatePrimary, kIn},
      {cc::kCreateLoaded, kIn},
      // A private key in clear, an inner wrapper's key, a credential.
      {cc::kLoadExternal, kIn},
      {cc::kImport, kIn},
      {cc::kDuplicate, kBoth},
      {cc::kMakeCredential, kIn},
      {cc::kActivateCredential, kOut},
      // authValues.
      {cc::kNvDefineSpace, kIn},
      {cc::kHierarchyChangeAuth, kIn},
      {cc::kObjectChangeAuth, kIn},
      {cc::kNvChangeAuth, kIn},
      {cc::kPcrSetAuthValue, kIn},
      {cc::kHashSequenceStart, kIn},
      {cc::kHmacStart, kIn},
      // Data in and out of the TPM's protection.
      {cc::kNvWrite, kIn},
      {cc::kNvRead, kOut},
      {cc::kUnseal, kOut},
      {cc::kGetRandom, kOut},
      {cc::kStirRandom, kIn},
      {cc::kEncryptDecrypt, kOut},
      {cc::kEncryptDecrypt2, kBoth},
      {cc::kRsaEncrypt, kIn},
      {cc::kRsaDecrypt, kOut},
      {cc::kEccEncrypt, kIn},
      {cc::kEccDecrypt, kOut},
      // Shared secrets.
      {cc::kEcdhKeyGen, kOut},
      {cc::kEcdhZGen, kOut},
      {cc::kZGen2Phase, kOut},
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
  if (secret.response && !encrypt && !caller_encrypts)
    return "its response's first parameter, which no session encrypts";
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
  if (code != cc::kStartAuthSession || handles.size() != 2 || handles[0] != rh::kNull || handles[1] != rh::kNull) {
    return 0;
  }
  StartAuthSessionRequest q = read_start_auth_session(parameters);
  // A trial session authorizes nothing (it never stands in a command's
  // session area), so only HMAC and policy sessions are tracked.
  bool authorizes = q.session_type == se::kHmac || q.session_type == se::kPolicy;
  return q.complete && q.encrypted_salt.empty() && authorizes && digest_size(q.auth_hash) ? q.auth_hash : 0;
}

std::optional<Bytes> listing_without(ByteView parameters, uint32_t handle) {
  std::optional<HandleListing> listing = read_handle_listing(parameters);
  if (!listing || std::erase(listing->handles, handle) == 0) return std::nullopt;
  auto out = write_handle_listing(*listing);
  if (!out.ok()) return std::nullopt;
  return std::move(*out);
}

}  // namespace tpmsec::wrapping
