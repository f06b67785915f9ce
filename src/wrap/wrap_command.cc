// CommandWrapper::wrap() (wrap.h): the caller's frame in, the frame to send
// out, as a sequence of steps: read the caller's frame, note what it uses,
// name its handles, find the caller's sessions the wrapper can re-sign,
// choose the wrapper's slot and what it encrypts, sign the frame.
#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/null_key.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wrap.h"
#include "wrap/caller_frame.h"
#include "wrap/wrap_state.h"

namespace tpmsec {

Result<Bytes> CommandWrapper::wrap(ByteView command) {
  pending_.reset();
  HeaderRead hr = read_frame_header(command, wrapping::kMaxFrame);
  if (hr.check != FrameCheck::kOk || hr.header.size != command.size()) {
    return usage_error(fmt::format("a command frame of {} bytes whose header is not a TPM command's", command.size()));
  }
  last_clear_ = {};
  // A PolicyPassword the wrapper re-signs goes out as PolicyAuthValue
  // (policy_password.cc).
  Bytes as_auth_value = hr.header.code == cc::kPolicyPassword ? policy_password_as_auth_value(command) : Bytes();
  if (!as_auth_value.empty()) command = as_auth_value;
  auto p = std::make_unique<Pending>();
  p->code = as_auth_value.empty() ? hr.header.code : cc::kPolicyAuthValue;
  p->caller_sessions = hr.header.tag == st::kSessions;
  p->info = find_command(p->code);
  counts_.try_emplace(p->code);  // every code seen is counted, a refused one too
  if (p->code == cc::kFlushContext) {
    if (auto areas = read_command_areas(command, wrapping::kMaxFrame); areas.ok()) {
      p->flushed = read_flush_handle(areas->parameters).value_or(0);
      names_.erase(p->flushed);
    }
  }
  note_policy_command(*p, command);
  note_policy_password(*p, command, !as_auth_value.empty());
  if (!p->info) return pass_through(command, std::move(p), PassedBecause::kUnknown);
  if (p->info->no_sessions) return pass_through(command, std::move(p), PassedBecause::kNoSession);

  // The caller's frame (caller_frame.h): anything it gets wrong, the TPM
  // answers as before; where the wrapper's session has no place, the command
  // goes out as the caller gave it.
  std::optional<CommandAreas> frame = wrapping::read_caller_frame(command);
  if (!frame) return pass_through(command, std::move(p), PassedBecause::kUnreadable);
  // A listing of the caller's own handles that a resource manager below
  // answers itself (frame_fields.h, asks_own_handles): no session could
  // cover the answer it writes, so it goes out as the caller gave it.
  if (p->code == cc::kGetCapability && factory_->tpm().transport().private_handles() &&
      asks_own_handles(frame->parameters)) {
    return pass_through(command, std::move(p), PassedBecause::kOwnHandles);
  }
  std::optional<wrapping::SlotPlan> plan = wrapping::plan_slot(frame->sessions, *p->info);
  if (!plan) return pass_through(command, std::move(p), PassedBecause::kNoSlot);
  Outgoing out(*p->info, std::move(*frame), *plan);
  note_caller_frame(*p, out);

  // Names (may read one through the session), then the session itself.
  TPMSEC_ASSIGN_OR_RETURN(std::vector<NamedHandle> named, names_of(p->handles, out.info));
  out.set_names(std::move(named));
  TPMSEC_RETURN_IF_ERROR(ensure_session());
  // Nothing to save is no reason to fail: the TPM answers the resend.
  if (need_room_) (void)make_room();
  TPMSEC_RETURN_IF_ERROR(track_caller_entries(*p, out));
  if (!plan_protection(*p, out)) return pass_through(command, std::move(p), PassedBecause::kUnreadable);
  std::string why = wrapping::secret_in_clear(out.info, out.frame.sessions, out.frame.parameters,
                                              out.plan.password_slot, out.decrypt, p->encrypts_response);
  if (strict_ && why.empty() && p->clear_policy_passwords) {
    why = "a password in a PolicyPassword session's HMAC field";
  }
  if (strict_ && !why.empty()) return strict_refusal(out.info, why);
  forget_names_changed_by(p->code, p->handles, out.frame.parameters);
  TPMSEC_ASSIGN_OR_RETURN(Bytes sent, sign_frame(*p, out));
  count_wrapped(*p, out);
  note_clear(*p, &out, std::move(why));
  pending_ = std::move(p);
  last_wrapped_ = commands_;
  return sent;
}

Result<Bytes> CommandWrapper::pass_through(ByteView command, std::unique_ptr<Pending> p, PassedBecause because) {
  // Sent as the caller gave it: every secret in it crosses in clear. A
  // frame the codec cannot read, the TPM refuses anyway.
  std::string why;
  if (auto areas = read_command_areas(command, wrapping::kMaxFrame); areas.ok()) {
    TPMSEC_RETURN_IF_ERROR(check_passed_policy_passwords(*p, *areas));
    if (p->info) {
      why = wrapping::secret_in_clear(*p->info, areas->sessions, areas->parameters, std::nullopt,
                                      /*decrypt=*/false, /*encrypt=*/false);
    }
  }
  if (strict_ && !why.empty()) return strict_refusal(*p->info, why);
  note_clear(*p, nullptr, std::move(why));
  // Without the wrapper's session it still changes what it changes: a
  // Name it makes stale (an index written or redefined, a Clear) is read
  // again before the next command that names it.
  if (auto areas = read_command_areas(command, wrapping::kMaxFrame); areas.ok()) {
    forget_names_changed_by(p->code, areas->handles, areas->parameters);
    note_context_command(*p, p->code, areas->handles, areas->parameters);
  }
  WrapCounts& counts = counts_[p->code];
  ++counts.passed_through;
  switch (because) {
    case PassedBecause::kNoSession:
      ++counts.passed_no_session;
      break;
    case PassedBecause::kUnknown:
      ++counts.passed_unknown;
      break;
    case PassedBecause::kUnreadable:
      ++counts.passed_unreadable;
      break;
    case PassedBecause::kNoSlot:
      ++counts.passed_no_slot;
      break;
    case PassedBecause::kOwnHandles:
      ++counts.passed_own_handles;
      break;
  }
  p->passed_through = true;
  pending_ = std::move(p);
  return Bytes(command.begin(), command.end());
}

void CommandWrapper::note_caller_frame(Pending& p, const Outgoing& out) {
  p.handles = out.frame.handles;
  for (const AuthEntry& e : out.frame.sessions) {
    if (e.handle != rh::kPasswordSession && !(e.attributes & attr::kContinueSession)) p.ending.push_back(e.handle);
    if ((e.handle >> 24) == ht::kPolicySession && (e.attributes & attr::kContinueSession)) {
      p.policy_sessions_used.push_back(e.handle);
    }
  }
  p.caller_hmac = out.plan.caller_hmac;
  p.caller_encrypts_response = std::any_of(
      out.frame.sessions.begin(), out.frame.sessions.end(),
      [](const AuthEntry& e) { return e.handle != rh::kPasswordSession && (e.attributes & attr::kEncrypt); });
  if (std::optional<ByteView> area = loaded_public_area(p.code, out.frame.parameters);
      area && p.caller_encrypts_response) {
    if (auto name = compute_name(*area); name.ok()) p.loaded_name = std::move(*name);
  }
  // The sessions this command uses keep their slots (session_room.cc).
  busy_.assign(p.handles.begin(), p.handles.end());
  for (const AuthEntry& e : out.frame.sessions) busy_.push_back(e.handle);
}

bool CommandWrapper::plan_protection(Pending& p, Outgoing& out) {
  const std::vector<AuthEntry>& sessions = out.frame.sessions;
  const ByteView params = out.frame.parameters;
  if (const std::optional<size_t>& password_slot = out.plan.password_slot) {
    p.our_slot = *password_slot;
    p.replaced_password = true;
    p.password_attributes = sessions[*password_slot].attributes;
    p.auth_value = SecretBytes(sessions[*password_slot].hmac);  // a password entry's hmac is the authValue
    p.sent_sessions = sessions.size();
  } else {
    p.our_slot = sessions.size();
    p.sent_sessions = sessions.size() + 1;
  }
  out.authorizes = p.our_slot < out.info.auth_count;
  out.decrypt = !out.caller_hmac && out.info.command_param_tpm2b && params.size() >= 2;
  p.encrypts_response = !out.caller_hmac && out.info.response_param_tpm2b;
  // The session authorizing the entity (slot 0) is answered under its new
  // authValue, the wrapper's or a re-signed caller's.
  if (p.code == cc::kHierarchyChangeAuth || p.code == cc::kNvChangeAuth) {
    Reader nr(params);
    p.new_auth_value = SecretBytes(nr.tpm2b("newAuth", 64));
    if (!nr.ok()) return false;
  }
  return true;
}

Result<Bytes> CommandWrapper::sign_frame(Pending& p, const Outgoing& out) {
  if (out.decrypt || p.encrypts_response) TPMSEC_RETURN_IF_ERROR(ensure_cipher_checked());
  // The session ends with this command when it is the one the front end
  // said would be the last (end_session_with()).
  bool last = end_with_ && commands_ == *end_with_ && !saved_ && !evicted_ && !need_room_;
  session_->set_attributes((last ? 0 : attr::kContinueSession) | (out.plan.caller_audits ? 0 : attr::kAudit) |
                           (out.decrypt ? attr::kDecrypt : 0) | (p.encrypts_response ? attr::kEncrypt : 0));
  TPMSEC_RETURN_IF_ERROR(session_->begin_command());
  SecretBytes parameters(out.frame.parameters);  // may hold a secret the bus must not see
  ByteView auth_value = out.authorizes ? p.auth_value.view() : ByteView();
  if (out.decrypt) {
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_parameter_data(parameters.mutable_view(), out.info.name));
    TPMSEC_RETURN_IF_ERROR(session_->encrypt_parameter(data, auth_value));
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes ours, session_->authorize(out.input_for(p.our_slot, parameters.view(), auth_value)));
  TPMSEC_ASSIGN_OR_RETURN(std::vector<Bytes> resigned, resign_caller_entries(p, out, parameters.view()));
  std::vector<ByteView> entries(p.sent_sessions);
  for (size_t i = 0; i < p.sent_sessions; ++i) {
    if (i == p.our_slot) {
      entries[i] = ours;
    } else {
      entries[i] = resigned[i].empty() ? out.frame.sessions[i].raw : ByteView(resigned[i]);
    }
  }
  return write_command_frame(p.code, p.handles, entries, parameters.view(), wrapping::kMaxFrame);
}

void CommandWrapper::count_wrapped(Pending& p, const Outgoing& out) {
  WrapCounts& counts = counts_[p.code];
  ++counts.wrapped;
  if (out.decrypt || p.encrypts_response) ++counts.encrypted;
  if (p.replaced_password) ++counts.passwords_replaced;
  counts.passwords_left += out.plan.passwords - (p.replaced_password ? 1 : 0);
  // PolicyPassword sessions' passwords (policy_password.cc).
  counts.passwords_replaced += p.policy_passwords.size();
  counts.passwords_left += p.clear_policy_passwords;
  p.passed_through = false;
}

}  // namespace tpmsec
