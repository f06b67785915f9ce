// The caller's sessions CommandWrapper re-signs (wrap.h): HMAC sessions the
// caller started unsalted and unbound (their HMAC key is the authValue
// alone, Part 1 §19.6.8) and uses with an empty authValue. Their nonces are
// tracked from authenticated responses only; kept beyond the process in a
// SessionCache when the front end gives one (keep_caller_sessions_in).
#include "tpmsec/command_frame.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wrap.h"
#include "wrap/wrap_state.h"

namespace tpmsec {
namespace {

// A caller's HMAC or policy session entry with an empty HMAC that neither
// audits nor encrypts: the TPM accepts an empty HMAC only from a session
// whose HMAC key is empty (no sessionKey, no authValue included), and then
// checks nothing of cpHash or the nonces, and answers with an empty HMAC
// too (the reference code's ComputeCommandHMAC and ComputeResponseHMAC,
// SessionProcess.c). Parameters encrypted beside it change nothing it
// proves: the entry goes out, and comes back, as it is. With any other key
// the TPM refuses it, as it would have without the wrapper.
bool empty_key_entry(const AuthEntry& e) {
  return ht::is_session(e.handle) && e.hmac.empty() && !(e.attributes & ~attr::kContinueSession);
}

}  // namespace

void CommandWrapper::track_caller_session(uint32_t handle, uint16_t auth_hash, ByteView nonce_tpm) {
  caller_sessions_[handle] =
      std::make_unique<HmacSession>(nullptr, handle, auth_hash, SymDef{}, SecretBytes(),
                                    Bytes(nonce_tpm.begin(), nonce_tpm.end()), Bytes(), 0, caller_nonce_.get());
  keep_caller_session(handle);
}

Result<HmacSession*> CommandWrapper::caller_session(uint32_t handle) {
  if (auto it = caller_sessions_.find(handle); it != caller_sessions_.end()) return it->second.get();
  // Started by an earlier process of the program (kept_sessions_).
  if (!kept_sessions_) return nullptr;
  TPMSEC_ASSIGN_OR_RETURN(std::optional<KeptCallerSession> kept, kept_sessions_->caller_session(handle));
  if (!kept || !digest_size(kept->auth_hash)) return nullptr;
  auto& s = caller_sessions_[handle];
  s = std::make_unique<HmacSession>(nullptr, handle, kept->auth_hash, SymDef{}, SecretBytes(), kept->nonce_tpm, Bytes(),
                                    0, caller_nonce_.get());
  return s.get();
}

void CommandWrapper::keep_caller_session(uint32_t handle) {
  auto it = caller_sessions_.find(handle);
  if (!kept_sessions_ || it == caller_sessions_.end()) return;
  ByteView nonce = it->second->nonce_tpm();
  // A cache: failing to keep costs the next process its encryption, nothing more.
  (void)kept_sessions_->put_caller_session(
      KeptCallerSession{handle, it->second->auth_hash(), Bytes(nonce.begin(), nonce.end())});
}

void CommandWrapper::forget_caller_session(uint32_t handle) {
  caller_sessions_.erase(handle);
  policy_auth_value_.erase(handle);
  // The TPM still holds PolicyAuthValue for a re-signed PolicyPassword:
  // its password may no longer be sent as it is (policy_password.cc).
  if (auto m = policy_passwords_.find(handle);
      m != policy_passwords_.end() && m->second != PolicyPasswordMode::kInClear) {
    m->second = PolicyPasswordMode::kLost;
  }
  // Only a session's handle has a kept record (a flushed object has none).
  if (kept_sessions_ && ht::is_session(handle)) (void)kept_sessions_->drop_caller_session(handle);
}

void CommandWrapper::caller_session_ended(uint32_t handle) {
  forget_caller_session(handle);
  // Gone from the TPM, not merely lost track of: a later session under the
  // same handle (another client's) starts with no PolicyPassword mode.
  policy_passwords_.erase(handle);
}

Result<bool> CommandWrapper::caller_entry_verifies(uint32_t handle, uint8_t attributes, ByteView nonce, ByteView raw,
                                                   const AuthorizeInput& in) {
  TPMSEC_ASSIGN_OR_RETURN(HmacSession * s, caller_session(handle));
  if (!s) return false;
  // A session of the caller's that audits or encrypts itself stays the caller's.
  if (attributes & ~attr::kContinueSession) return false;
  s->set_attributes(attributes);
  caller_nonce_->set(nonce);
  auto entry = s->begin_command().ok() ? s->authorize(in) : Result<Bytes>(usage_error("nonce"));
  if (entry.ok() && crypto::constant_time_equal(*entry, raw)) return true;
  // Another authValue, or a nonce the wrapper no longer tracks: not again.
  forget_caller_session(handle);
  return false;
}

Result<Bytes> CommandWrapper::resign_caller_entry(uint32_t handle, ByteView nonce, const AuthorizeInput& in) {
  HmacSession& s = *caller_sessions_.at(handle);
  caller_nonce_->set(nonce);
  TPMSEC_RETURN_IF_ERROR(s.begin_command());
  return s.authorize(in);
}

Status CommandWrapper::track_caller_entries(Pending& p, Outgoing& out) {
  // The caller's HMAC sessions the wrapper can re-sign (wrap.h): then the
  // caller's sessions do not stop parameter encryption.
  const std::vector<AuthEntry>& sessions = out.frame.sessions;
  const ByteView params = out.frame.parameters;
  bool resignable = true;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const AuthEntry& e = sessions[i];
    if (e.handle == rh::kPasswordSession) continue;
    TPMSEC_ASSIGN_OR_RETURN(bool policy_password, track_policy_password(p, out, i));
    if (policy_password) continue;
    TPMSEC_ASSIGN_OR_RETURN(
        bool verifies, caller_entry_verifies(e.handle, e.attributes, e.nonce, e.raw, out.input_for(i, params, {})));
    if (verifies) {
      p.caller_tracked.emplace_back(i, e.handle);
    } else if (!empty_key_entry(e)) {
      resignable = false;
    }
  }
  out.caller_hmac = out.plan.caller_hmac && !resignable;
  p.unsalted_session_hash = wrapping::computable_session_hash(p.code, p.handles, params);
  return ok_status();
}

Result<std::vector<Bytes>> CommandWrapper::resign_caller_entries(Pending& p, const Outgoing& out, ByteView parameters) {
  // Re-signed over the parameters as sent; the first (when it is not the
  // wrapper's) also covers the wrapper's nonceTPM for decrypt and encrypt
  // (Part 1 §19.6.5), once when one session carries both.
  std::vector<Bytes> resigned(out.frame.sessions.size());
  if (!out.decrypt && !p.encrypts_response && p.policy_passwords.empty()) return resigned;
  p.resigned = true;
  for (auto [slot, handle] : p.caller_tracked) {
    const SecretBytes* password = policy_password_of(p, slot);  // policy_password.cc
    AuthorizeInput in = out.input_for(slot, parameters, password ? password->view() : ByteView());
    if (slot == 0) {
      if (out.decrypt) in.decrypt_nonce = session_->nonce_tpm();
      if (p.encrypts_response && !out.decrypt) in.encrypt_nonce = session_->nonce_tpm();
    }
    TPMSEC_ASSIGN_OR_RETURN(resigned[slot], resign_caller_entry(handle, out.frame.sessions[slot].nonce, in));
  }
  return resigned;
}

Result<std::vector<Bytes>> CommandWrapper::check_caller_responses(const Pending& p, const ResponseAreas& areas,
                                                                  ByteView parameters) {
  // The TPM's HMAC for each checked (their nonces roll only on an answer
  // that verifies), and re-signed over the response the caller gets.
  const CommandInfo& info = *p.info;
  std::vector<Bytes> entries(p.sent_sessions);
  for (auto [slot, handle] : p.caller_tracked) {
    HmacSession& s = *caller_sessions_.at(handle);
    const AuthEntry& ce = areas.sessions[slot];
    VerifyInput cin{&info, rc::kSuccess, areas.parameters, AuthResponse{ce.nonce, ce.attributes, ce.hmac}, {}};
    if (p.new_auth_value && slot == 0 && includes_auth_value(handle)) cin.new_auth_value = p.new_auth_value->view();
    if (Status st = s.verify(cin); !st.ok()) {
      forget_caller_session(handle);
      retire_session(true);
      return st.error().with_context(std::string(info.name) + " response (the caller's session)");
    }
    if (policy_password_of(p, slot)) {
      TPMSEC_ASSIGN_OR_RETURN(entries[slot], policy_password_response(ce));
    } else if (p.resigned) {
      cin.parameters = parameters;
      TPMSEC_ASSIGN_OR_RETURN(Bytes mac, s.response_hmac(cin));
      AuthEntry resigned{.nonce = ce.nonce, .attributes = ce.attributes, .hmac = mac};
      TPMSEC_ASSIGN_OR_RETURN(entries[slot], write_auth_entry(resigned, /*command=*/false));
    }
    if (s.usable()) {
      keep_caller_session(handle);  // its nonce rolled
    } else {
      forget_caller_session(handle);  // ended without continueSession
    }
  }
  return entries;
}

void CommandWrapper::note_started_session(const Pending& p, const ResponseAreas& areas, ByteView parameters) {
  if (!p.unsalted_session_hash || p.info->response_handle_count != 1 || areas.handles.empty()) return;
  // Its nonceTPM is the caller's ciphertext: not a session the wrapper can follow.
  if (p.caller_encrypts_response) return;
  std::optional<ByteView> nonce_tpm = read_start_auth_session_nonce(parameters);
  if (!nonce_tpm || nonce_tpm->empty()) return;
  const uint32_t handle = areas.handles[0];
  track_caller_session(handle, p.unsalted_session_hash, *nonce_tpm);
  // A new policy session's HMACs include no authValue until PolicyAuthValue.
  if ((handle >> 24) == ht::kPolicySession) policy_auth_value_[handle] = false;
}

bool CommandWrapper::includes_auth_value(uint32_t handle) const {
  if ((handle >> 24) != ht::kPolicySession) return true;
  auto it = policy_auth_value_.find(handle);
  // Started before this wrapper saw it (another process's, kept): as an
  // HMAC session, the one guess that fits a policy with PolicyAuthValue.
  return it == policy_auth_value_.end() || it->second;
}

void CommandWrapper::note_policy_command(Pending& p, ByteView command) {
  // The policy session's place in each command's handle area (Part 3 §23).
  size_t index = 0;
  bool binds_parameters = false;  // the session's cpHash (or pHash) is set by it
  switch (p.code) {
    case cc::kPolicyCpHash:
    case cc::kPolicyParameters:
      binds_parameters = true;
      break;
    case cc::kPolicySecret:
    case cc::kPolicySigned:
      index = 1;
      [[fallthrough]];
    case cc::kPolicyTicket:
      // Their cpHashA, the second TPM2B parameter (after nonceTPM, or the
      // ticket's timeout), binds the command when it is not empty.
      binds_parameters = true;
      break;
    case cc::kPolicyAuthValue:
    case cc::kPolicyRestart:
      break;
    default:
      return;
  }
  auto areas = read_command_areas(command, wrapping::kMaxFrame);
  if (!areas.ok() || areas->handles.size() <= index) return;
  const uint32_t session = areas->handles[index];
  if (binds_parameters && p.code != cc::kPolicyCpHash && p.code != cc::kPolicyParameters) {
    Reader r(areas->parameters);
    (void)r.tpm2b("first", 1024);
    ByteView cp_hash = r.tpm2b("cpHashA", 1024);
    binds_parameters = !r.ok() || !cp_hash.empty();
  }
  if (binds_parameters) {
    // The TPM hashes the parameters as they are sent, encrypted ones
    // encrypted (Part 1, "Session-based encryption"), and the caller's
    // cpHash is over its own: its commands under this session go out with
    // the parameters it gave, its own sessions audited, not re-signed (nor
    // their parameters encrypted).
    forget_caller_session(session);
    return;
  }
  if (!policy_auth_value_.count(session)) return;
  p.policy_session = session;
  p.policy_auth_value = p.code == cc::kPolicyAuthValue;
}

}  // namespace tpmsec
