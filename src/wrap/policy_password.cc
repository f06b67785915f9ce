// PolicyPassword sessions CommandWrapper re-signs (wrap.h). A caller's
// policy session on which TPM2_PolicyPassword ran carries the authValue in
// clear in its HMAC field (Part 3 TPM2_PolicyPassword: isPasswordNeeded;
// Part 1 §19.6.13); the same session after TPM2_PolicyAuthValue carries an
// HMAC keyed by it, and both extend policyDigest with
// TPM_CC_PolicyAuthValue, so the policy the session satisfies is the same.
// For a session the caller started unsalted and unbound through this
// wrapper (its HMAC key is the authValue alone, and the wrapper tracks its
// nonces: caller_sessions.cc), PolicyPassword goes out as PolicyAuthValue,
// and each command whose entry shows the password goes out with the HMAC it
// keys; the caller's answer is a PolicyPassword session's (empty HMAC: the
// reference code's ComputeResponseHMAC, SessionProcess.c), once the TPM's
// HMAC verified.
#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/wrap.h"
#include "wrap/caller_frame.h"
#include "wrap/wrap_state.h"

namespace tpmsec {

Bytes CommandWrapper::policy_password_as_auth_value(ByteView command) {
  auto areas = read_command_areas(command, wrapping::kMaxFrame, wrapping::kMaxSessions);
  // A session of the caller's on it (an audit session) signs the command
  // code: the command goes out as it is.
  if (!areas.ok() || areas->handles.size() != 1 || !areas->sessions.empty()) return {};
  const uint32_t session = areas->handles[0];
  // Started through this wrapper (its policy seen whole) and tracked.
  if (!policy_auth_value_.count(session) || !caller_sessions_.count(session)) return {};
  auto frame = write_command_frame(cc::kPolicyAuthValue, areas->handles, {}, areas->parameters, wrapping::kMaxFrame);
  return frame.ok() ? std::move(*frame) : Bytes();
}

void CommandWrapper::note_policy_password(Pending& p, ByteView command, bool as_auth_value) {
  if (p.code != cc::kPolicyPassword && p.code != cc::kPolicyAuthValue && p.code != cc::kPolicyRestart) return;
  auto areas = read_command_areas(command, wrapping::kMaxFrame);
  if (!areas.ok() || areas->handles.size() != 1) return;
  p.password_session = areas->handles[0];
  if (as_auth_value) {
    p.password_mode = PolicyPasswordMode::kResigned;
  } else if (p.code == cc::kPolicyPassword) {
    p.password_mode = PolicyPasswordMode::kInClear;
  }  // PolicyAuthValue and PolicyRestart clear isPasswordNeeded
}

void CommandWrapper::apply_policy_password(const Pending& p) {
  // A policy session that authorized a command and continues starts its
  // policy again (the reference code's UpdateInternalSession,
  // SessionProcess.c: SessionResetPolicyData): no PolicyPassword, no
  // PolicyAuthValue.
  for (uint32_t h : p.policy_sessions_used) {
    policy_passwords_.erase(h);
    if (auto it = policy_auth_value_.find(h); it != policy_auth_value_.end()) it->second = false;
  }
  if (!p.password_session) return;
  if (p.password_mode) {
    policy_passwords_[p.password_session] = *p.password_mode;
  } else {
    policy_passwords_.erase(p.password_session);
  }
}

Result<bool> CommandWrapper::track_policy_password(Pending& p, const Outgoing& out, size_t slot) {
  const AuthEntry& e = out.frame.sessions[slot];
  auto mode = policy_passwords_.find(e.handle);
  if (mode == policy_passwords_.end()) return false;
  switch (mode->second) {
    case PolicyPasswordMode::kInClear:
      // The TPM compares the password and computes no HMAC for it, so
      // parameters encrypted beside it change nothing it proves: only the
      // password itself crosses in clear. One that audits or encrypts
      // stays the caller's (the wrapper adds nothing beside it).
      if (!e.hmac.empty()) ++p.clear_policy_passwords;
      return !(e.attributes & ~attr::kContinueSession);
    case PolicyPasswordMode::kResigned: {
      auto s = caller_sessions_.find(e.handle);
      // The caller's nonce must be nonceTPM's size (HmacSession draws one
      // so); the TPM took PolicyAuthValue: sent as it is, the password
      // would count as an authorization failure.
      if (s != caller_sessions_.end() && e.nonce.size() == s->second->nonce_tpm().size() &&
          !(e.attributes & ~attr::kContinueSession)) {
        s->second->set_attributes(e.attributes);  // continueSession as the caller sent it
        p.caller_tracked.emplace_back(slot, e.handle);
        p.policy_passwords.emplace_back(slot, SecretBytes(e.hmac));
        return true;
      }
      break;
    }
    case PolicyPasswordMode::kLost:
      break;
  }
  return unsupported_error(fmt::format(
      "{} not sent: policy session 0x{:08x} took PolicyPassword as PolicyAuthValue, and this entry cannot be "
      "re-signed (a nonce or attributes the wrapper cannot sign with)",
      out.info.name, e.handle));
}

const SecretBytes* CommandWrapper::policy_password_of(const Pending& p, size_t slot) const {
  for (const auto& [s, password] : p.policy_passwords) {
    if (s == slot) return &password;
  }
  return nullptr;
}

Result<Bytes> CommandWrapper::policy_password_response(const AuthEntry& tpm_entry) const {
  return write_auth_entry(AuthEntry{.nonce = tpm_entry.nonce, .attributes = tpm_entry.attributes}, /*command=*/false);
}

Status CommandWrapper::check_passed_policy_passwords(Pending& p, const CommandAreas& areas) {
  for (const AuthEntry& e : areas.sessions) {
    if ((e.handle >> 24) == ht::kPolicySession && (e.attributes & attr::kContinueSession)) {
      p.policy_sessions_used.push_back(e.handle);
    }
    auto mode = policy_passwords_.find(e.handle);
    if (mode == policy_passwords_.end()) continue;
    const std::string_view name = areas.info ? areas.info->name : std::string_view("a command");
    if (mode->second != PolicyPasswordMode::kInClear) {
      return unsupported_error(fmt::format(
          "{} not sent: policy session 0x{:08x} took PolicyPassword as PolicyAuthValue, and the wrapper cannot "
          "put its session on this command to re-sign it",
          name, e.handle));
    }
    if (strict_ && !e.hmac.empty() && areas.info) {
      return strict_refusal(*areas.info, "a password in a PolicyPassword session's HMAC field");
    }
  }
  return ok_status();
}

void CommandWrapper::note_clear(const Pending& p, const Outgoing* out, std::string what) {
  last_clear_ = {};
  if (what.empty()) {
    if (!p.clear_policy_passwords) return;
    what = "a password in a PolicyPassword session's HMAC field";
  }
  ++counts_[p.code].secrets_left;
  last_clear_.what = std::move(what);
  if (!out) {
    last_clear_.why =
        "the wrapper's session has no place on it (three sessions, an empty authorization slot, or "
        "a command it does not know): it went out as the program gave it";
  } else if (out->caller_hmac) {
    last_clear_.callers_session = true;
    last_clear_.why =
        "the program's own HMAC or policy session covers its parameters as sent, keyed by an "
        "authValue the frame does not show: the wrapper cannot re-sign it";
  } else if (p.clear_policy_passwords) {
    last_clear_.why =
        "a PolicyPassword session the wrapper did not see start (unsalted, unbound) cannot be "
        "re-signed";
  } else {
    last_clear_.why = "a second password entry (the wrapper's session replaces only one)";
  }
}

}  // namespace tpmsec
