// CommandWrapper::unwrap() (wrap.h): the TPM's response in, the response
// the caller would have had without the wrapper out, as a sequence of steps:
// split it (response_frame.h), authenticate it before a byte of it goes
// anywhere, check the caller's re-signed sessions, learn what it
// establishes (Names, a caller's new session, handles), and write the
// caller's response.
#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wrap.h"
#include "wrap/caller_frame.h"
#include "wrap/wrap_state.h"

namespace tpmsec {
namespace {

using wrapping::kMaxFrame;
using wrapping::kMaxSessions;

// The response the caller would have had: its own entries (the TPM's, or
// re-signed), a password response where the wrapper's session took its
// password's slot (Part 1 §19.8.5: empty nonce, continueSession, empty
// hmac), and no session area when it sent none.
Result<Bytes> caller_response(uint32_t code, const ResponseAreas& areas, ByteView parameters, bool caller_sessions,
                              size_t our_slot, bool replaced_password, const std::vector<Bytes>& resigned) {
  TPMSEC_ASSIGN_OR_RETURN(Bytes password, write_auth_entry(AuthEntry{.attributes = attr::kContinueSession},
                                                           /*command=*/false));
  std::vector<ByteView> entries;
  for (size_t i = 0; caller_sessions && i < areas.sessions.size(); ++i) {
    if (i != our_slot) {
      entries.push_back(resigned[i].empty() ? areas.sessions[i].raw : ByteView(resigned[i]));
    } else if (replaced_password) {
      entries.push_back(password);
    }
  }
  return write_response_frame(code, areas.handles, parameters, entries, kMaxFrame);
}

}  // namespace

Result<Bytes> CommandWrapper::unwrap_checked(ByteView response) {
  Pending& p = *pending_;
  HeaderRead hr = read_frame_header(response, kMaxFrame);
  if (hr.check != FrameCheck::kOk || hr.header.size != response.size()) {
    if (!p.passed_through) retire_session(/*may_exist=*/true);
    return parse_error(fmt::format("the response to 0x{:x} is not a TPM response ({} bytes)", p.code, response.size()));
  }
  if (p.passed_through) return unwrap_passed(p, response, hr.header.code);
  if (hr.header.code != rc::kSuccess) return unwrap_error(p, response, hr.header.code);
  const CommandInfo& info = *p.info;
  if (hr.header.tag != st::kSessions) {
    retire_session(true);
    return integrity_error(fmt::format("{} response has no session area: it cannot be authenticated", info.name));
  }
  auto areas = read_response_areas(response, info.response_handle_count, kMaxFrame, kMaxSessions);
  if (areas.ok() && areas->sessions.size() != p.sent_sessions) {
    areas = parse_error(fmt::format("{} session entries for the {} sent", areas->sessions.size(), p.sent_sessions));
  }
  if (!areas.ok()) {
    retire_session(true);
    return areas.error().with_context(std::string(info.name) + " response");
  }
  // Authenticated before a byte of it goes anywhere.
  TPMSEC_ASSIGN_OR_RETURN(SecretBytes plain, verify_response(p, *areas));
  TPMSEC_ASSIGN_OR_RETURN(std::vector<Bytes> resigned, check_caller_responses(p, *areas, plain.view()));
  note_started_session(p, *areas, plain.view());
  note_names_in_response(p, *areas, plain.view());
  note_response_handles(p, response);
  hide_own_session(p, plain);
  // A command sent without continueSession ended the session (its response
  // verified): the next command starts another.
  if (!session_->usable()) retire_session(/*may_exist=*/false);
  return caller_response(rc::kSuccess, *areas, plain.view(), p.caller_sessions, p.our_slot, p.replaced_password,
                         resigned);
}

Result<Bytes> CommandWrapper::unwrap_passed(const Pending& p, ByteView response, uint32_t code) {
  if (code == rc::kSuccess) {
    note_response_handles(p, response);
    note_saved_context(p, response);
    // The caller flushed the wrapper's session (tpm2_flushcontext -s): the
    // next command starts another. Flushed again in case the success was
    // forged; gone counts as flushed.
    if (p.code == cc::kFlushContext && session_ && p.flushed == session_->handle()) retire_session(true);
    // A Startup means a TPM Reset or Restart: no session survived it.
    if (p.code == cc::kStartup) {
      retire_session(true);
      forget_nv_and_persistent_names();
    }
  }
  return Bytes(response.begin(), response.end());
}

Result<Bytes> CommandWrapper::unwrap_error(const Pending& p, ByteView response, uint32_t code) {
  // An error carries no session area (Part 1 §18.10) and is the caller's,
  // unchanged, session numbers included (the wrapper's slot is the one the
  // caller's password had, or after the caller's sessions).
  if (response.size() != kFrameHeaderBytes) {
    retire_session(true);
    return parse_error(fmt::format("{} response: error 0x{:x} with {} more bytes", p.info->name, code,
                                   response.size() - kFrameHeaderBytes));
  }
  session_->command_failed(code);
  std::optional<size_t> gone = wrapping::session_gone(code);
  std::optional<size_t> failed = rc_failed_session(code);
  if ((gone && *gone == p.our_slot) || (failed && *failed == p.our_slot && !p.replaced_password)) {
    // A Name may be stale (an index written by another client): read again.
    // Not a transient object's behind private handles (a resource manager's):
    // its Name, authenticated, is the object's for its life, and a read now
    // would authenticate whatever the bus swapped in under that handle.
    const bool keep_objects = factory_->tpm().transport().private_handles();
    for (uint32_t h : p.handles) {
      if (!keep_objects || (h >> 24) != ht::kTransient) names_.erase(h);
    }
  }
  if (gone && *gone == p.our_slot) {
    retire_session(true);
    session_lost_ = true;
    ++sessions_lost_;
  } else if (failed && *failed == p.our_slot) {
    // The TPM refused the session's HMAC: a wrong password it replaced, or
    // nonces out of step (an error forged over an answer the TPM gave: the
    // TPM rolled its nonce, the wrapper did not). A new session either way,
    // so one forged answer never leaves every later command refused; an
    // audit-only slot's failure is the session's alone (a retry_safe command
    // is sent again).
    retire_session(true);
    session_lost_ = !p.replaced_password;
  }
  return Bytes(response.begin(), response.end());
}

Result<SecretBytes> CommandWrapper::verify_response(const Pending& p, const ResponseAreas& areas) {
  const CommandInfo& info = *p.info;
  const AuthEntry& e = areas.sessions[p.our_slot];
  bool authorizes = p.our_slot < info.auth_count;
  VerifyInput in{&info, rc::kSuccess, areas.parameters, AuthResponse{e.nonce, e.attributes, e.hmac},
                 authorizes ? p.auth_value.view() : ByteView()};
  if (p.new_auth_value && p.our_slot == 0) in.new_auth_value = p.new_auth_value->view();
  if (Status st = session_->verify(in); !st.ok()) {
    retire_session(true);
    return st.error().with_context(std::string(info.name) + " response");
  }
  SecretBytes plain(areas.parameters);
  if (p.encrypts_response) {
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_parameter_data(plain.mutable_view(), info.name));
    TPMSEC_RETURN_IF_ERROR(session_->decrypt_parameter(data, authorizes ? p.auth_value.view() : ByteView()));
  }
  return plain;
}

void CommandWrapper::hide_own_session(const Pending& p, SecretBytes& parameters) {
  // The wrapper's own session is not the caller's to see (nor to flush: it
  // may end with this very command): a handle listing the caller gets
  // without it, as it would without the wrapper. Not under a session of the
  // caller's, whose response HMAC covers the listing as the TPM gave it.
  if (p.code != cc::kGetCapability || p.caller_hmac) return;
  if (std::optional<Bytes> listing = wrapping::listing_without(parameters.view(), session_->handle())) {
    parameters = SecretBytes(*listing);
  }
}

void CommandWrapper::note_response_handles(const Pending& p, ByteView response) {
  // Another client's handles (the caller's) are never this wrapper's to
  // flush, not even by a sweep (handle_ledger.h); a FlushContext the TPM
  // accepted frees its number.
  Tpm& tpm = factory_->tpm();
  if (p.policy_session && policy_auth_value_.count(p.policy_session)) {
    policy_auth_value_[p.policy_session] = p.policy_auth_value;
  }
  apply_policy_password(p);
  if (p.code == cc::kFlushContext && p.flushed) {
    tpm.foreign_flushed(p.flushed);
    forget_caller_session(p.flushed);
    policy_passwords_.erase(p.flushed);
    callers_loaded_.erase(p.flushed);
  }
  // SequenceComplete and EventSequenceComplete end their sequence object
  // (TPMA_CC.flushed): its number is free for the next object loaded.
  if (p.info && p.info->flushes_handles) {
    for (uint32_t h : p.handles) {
      if ((h >> 24) != ht::kTransient) continue;
      tpm.foreign_flushed(h);
      names_.erase(h);
    }
  }
  for (uint32_t h : p.ending) {
    tpm.foreign_flushed(h);
    forget_caller_session(h);
    policy_passwords_.erase(h);
    callers_loaded_.erase(h);
  }
  uint8_t count = p.info ? p.info->response_handle_count : 0;
  if (p.code == cc::kContextLoad) count = 1;
  if (count != 1) return;
  auto handles = read_response_handles(response, count, kMaxFrame);
  if (!handles.ok()) return;
  uint32_t h = handles->front();
  tpm.note_foreign(h);
  if (p.code == cc::kContextLoad) name_loaded_context(p, h);
  if (p.code == cc::kStartAuthSession) policy_passwords_.erase(h);  // a new session under that handle
  if (ht::is_session(h)) callers_loaded_.insert(h);
}

}  // namespace tpmsec
