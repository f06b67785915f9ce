#include "tpmsec/tpm.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <optional>
#include <thread>

#include "tpmsec/command_frame.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_frame.h"

namespace tpmsec {
namespace {

constexpr int kMaxRetries = 8;

// TPM_CAP_HANDLES ranges the ledger lists: transient objects, loaded
// sessions (TPM_HT_LOADED_SESSION) and saved sessions (TPM_HT_SAVED_SESSION,
// the same 0x03 as policy sessions), Part 2 §7.2 and Part 3 §30.2.
constexpr uint32_t kListedRanges[] = {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession};
constexpr uint32_t kHandlesPerPage = 128;
constexpr int kMaxHandlePages = 8;

// Which sessions carry decrypt and encrypt (-1: none).
struct CipherSessions {
  int decrypt = -1;
  int encrypt = -1;
};

// What the command table says of the command, checked against what the
// caller gives it, before anything is sent; which sessions carry parameter
// encryption (only a TPM2B first parameter can).
Result<CipherSessions> check_command(const CommandInfo& info, std::span<const NamedHandle* const> handles,
                                     std::span<const Auth> auths) {
  if (auths.size() < info.auth_count) {
    return usage_error(fmt::format("{} needs {} authorization{}, got {}", info.name, info.auth_count,
                                   info.auth_count == 1 ? "" : "s", auths.size()));
  }
  if (auths.size() > 3) return usage_error(fmt::format("{}: at most 3 sessions per command", info.name));
  if (info.no_sessions && !auths.empty()) {
    return usage_error(fmt::format("{} takes no sessions (Part 3: TPM_ST_NO_SESSIONS only)", info.name));
  }
  if (handles.size() != info.handle_count) {
    return usage_error(fmt::format("{} takes {} handle{}, got {}", info.name, info.handle_count,
                                   info.handle_count == 1 ? "" : "s", handles.size()));
  }
  CipherSessions c;
  for (size_t i = 0; i < auths.size(); ++i) {
    if (auths[i].session->decrypts_command()) {
      if (c.decrypt >= 0) return usage_error("two sessions carry the decrypt attribute");
      c.decrypt = static_cast<int>(i);
    }
    if (auths[i].session->encrypts_response()) {
      if (c.encrypt >= 0) return usage_error("two sessions carry the encrypt attribute");
      c.encrypt = static_cast<int>(i);
    }
  }
  if (c.decrypt >= 0 && !info.command_param_tpm2b) {
    return usage_error(
        fmt::format("{} cannot carry command parameter encryption: its first parameter is not a TPM2B", info.name));
  }
  if (c.encrypt >= 0 && !info.response_param_tpm2b) {
    return usage_error(fmt::format(
        "{} cannot carry response parameter encryption: its first response parameter is not a TPM2B", info.name));
  }
  return c;
}

// The command frame: each session's authorization over the parameters as
// sent; the first session's also covers the nonceTPM of another session that
// carries decrypt or encrypt (Part 1 §19.6.5).
Result<Bytes> frame_command(const CommandInfo& info, std::span<const NamedHandle* const> handles, ByteView parameters,
                            std::span<const Auth> auths, CipherSessions cipher) {
  // At most 3 sessions (check_command) and 3 handles (the command table):
  // the areas on the stack, no allocation of their own.
  if (handles.size() > 3) return usage_error(fmt::format("{}: at most 3 handles per command", info.name));
  std::array<Bytes, 3> entries;
  for (size_t i = 0; i < auths.size(); ++i) {
    AuthorizeInput in;
    in.info = &info;
    in.handles = handles;
    in.parameters = parameters;
    if (i < info.auth_count) in.entity = handles[i];
    in.auth_value = auths[i].auth_value;
    if (i == 0) {
      if (cipher.decrypt > 0) in.decrypt_nonce = auths[cipher.decrypt].session->nonce_tpm();
      if (cipher.encrypt > 0 && cipher.encrypt != cipher.decrypt) {
        in.encrypt_nonce = auths[cipher.encrypt].session->nonce_tpm();
      }
    }
    TPMSEC_ASSIGN_OR_RETURN(entries[i], auths[i].session->authorize(in));
  }
  std::array<uint32_t, 3> numbers{};
  for (size_t i = 0; i < handles.size(); ++i) numbers[i] = handles[i]->handle;
  std::array<ByteView, 3> views;
  for (size_t i = 0; i < auths.size(); ++i) views[i] = entries[i];
  auto frame = write_command_frame(info.code, std::span(numbers).first(handles.size()),
                                   std::span(views).first(auths.size()), parameters, kMaxCommandBytes);
  if (!frame.ok()) return frame.error().with_context(std::string(info.name));
  return frame;
}

// An error response: the sessions learn of it, then it is the TPM's error,
// unless it blames a session whose key no answer has confirmed yet.
Error error_response(const CommandInfo& info, uint32_t code, ByteView response, std::span<const Auth> auths) {
  for (const Auth& a : auths) a.session->command_failed(code);
  if (response.size() != kFrameHeaderBytes) {
    return parse_error(fmt::format("{} response: error {} carries {} unexpected bytes", info.name, describe_rc(code),
                                   response.size() - kFrameHeaderBytes));
  }
  // The TPM rejected the HMAC (or the handle) of a session none of whose
  // responses has verified yet: tpmsec took both from the StartAuthSession
  // answer, which nothing authenticates, so that answer (or this command)
  // was altered on the bus. Not a TPM error to retry.
  if (std::optional<size_t> s = rc_failed_session(code);
      s && *s < auths.size() && !auths[*s].session->key_confirmed()) {
    return integrity_error(
        fmt::format("the TPM rejected {}'s new session {} ({}): its "
                    "StartAuthSession or this command was altered on the bus",
                    info.name, *s + 1, describe_rc(code)));
  }
  return tpm_error(code, info.name);
}

// Everything here parses hostile bytes: the response split by the frame
// codec, authenticated by every session before anything of it is used, then
// its first parameter decrypted. Response handles are not covered by rpHash
// (Part 1 §18.9): callers check them against names.
Result<RawResponse> read_response(const CommandInfo& info, ByteView response, std::span<const Auth> auths,
                                  CipherSessions cipher) {
  // The tag is not judged before the code: an error is the TPM's under any tag.
  HeaderRead hr = read_frame_header(response, response.size());
  if (hr.check == FrameCheck::kIncomplete) {
    return parse_error(fmt::format("{} response: a truncated header ({} bytes)", info.name, response.size()));
  }
  if (hr.header.size != response.size()) {
    return parse_error(
        fmt::format("{} response: header says {} bytes, received {}", info.name, hr.header.size, response.size()));
  }
  if (hr.header.code != rc::kSuccess) return error_response(info, hr.header.code, response, auths);
  if (hr.header.tag != (auths.empty() ? st::kNoSessions : st::kSessions)) {
    // A missing session area would skip response authentication.
    return parse_error(fmt::format("{} response: tag 0x{:04x} does not match the {} session(s) sent", info.name,
                                   hr.header.tag, auths.size()));
  }
  auto areas = read_response_areas(response, info.response_handle_count, response.size());
  if (!areas.ok()) return areas.error().with_context(std::string(info.name) + " response");
  if (areas->sessions.size() != auths.size()) {
    return parse_error(fmt::format("{} response: {} session entries for the {} session(s) sent", info.name,
                                   areas->sessions.size(), auths.size()));
  }
  for (size_t i = 0; i < auths.size(); ++i) {
    const AuthEntry& e = areas->sessions[i];
    VerifyInput in{&info, rc::kSuccess, areas->parameters, AuthResponse{e.nonce, e.attributes, e.hmac},
                   auths[i].auth_value};
    Status st = auths[i].session->verify(in);
    if (!st.ok()) return st.error().with_context(std::string(info.name) + " response");
  }
  RawResponse out;
  out.handles = std::move(areas->handles);
  out.parameters.assign(areas->parameters.begin(), areas->parameters.end());
  if (cipher.encrypt >= 0) {
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_parameter_data(out.parameters, info.name));
    const Auth& a = auths[cipher.encrypt];
    TPMSEC_RETURN_IF_ERROR(a.session->decrypt_parameter(data, a.auth_value));
  }
  return out;
}

}  // namespace

Result<MutableByteView> first_parameter_data(MutableByteView params, std::string_view what) {
  if (params.size() < 2) return parse_error(fmt::format("{}: no first parameter to encrypt", what));
  size_t size = size_t{params[0]} << 8 | params[1];
  if (size > params.size() - 2) {
    return parse_error(
        fmt::format("{}: first parameter size {} exceeds the {} bytes present", what, size, params.size() - 2));
  }
  return params.subspan(2, size);
}

Error tpm_error(uint32_t code, std::string_view command) {
  return Error(ErrorKind::kTpm, fmt::format("TPM error {} from {}", describe_rc(code), command), code);
}

bool handle_gone(const Error& e) {
  uint32_t base = rc_base(e.tpm_rc());
  return e.kind() == ErrorKind::kTpm && (base == rc::kHandle || base == rc::kValue);
}

Status Tpm::flush(uint32_t handle) {
  HeldNotice notice(*this);
  if (!ledger_.owns(handle)) return ok_status();
  ledger_.forget(handle);
  return flush_forgotten(handle);
}

Status Tpm::flush_forgotten(uint32_t handle) {
  if (ledger_.owns(handle) || ledger_.foreign(handle) || !HandleLedger::tracked(handle)) {
    return usage_error(fmt::format("0x{:08x} is not a handle this Tpm let go of", handle));
  }
  auto r = run(cmd::FlushContext{handle});
  if (r.ok()) return ok_status();
  // Not clearly flushed: if it is still there, the sweep flushes it again;
  // if the response that named it was forged, the real one is a stray.
  ledger_.need_flush(handle);
  (void)sweep();
  if (handle_gone(r.error())) return ok_status();
  return r.error();
}

Result<std::vector<uint32_t>> Tpm::list_handles(uint32_t first, std::span<const Auth> auths) {
  std::vector<uint32_t> out;
  uint32_t property = first;
  for (int page = 0; page < kMaxHandlePages; ++page) {
    TPMSEC_ASSIGN_OR_RETURN(auto rsp, run(cmd::GetCapability{cap::kHandles, property, kHandlesPerPage}, auths));
    if (rsp.capability_data.capability != cap::kHandles) {
      return parse_error(
          fmt::format("GetCapability(TPM_CAP_HANDLES) answered capability 0x{:x}", rsp.capability_data.capability));
    }
    const auto& handles = rsp.capability_data.handles;
    for (uint32_t h : handles) {
      if (HandleLedger::tracked(h)) out.push_back(h);
    }
    if (!rsp.more_data || handles.empty()) return out;
    // The next page starts after the last slot listed (loaded sessions are
    // listed as 0x02… or 0x03… by type, in slot order).
    uint32_t next = (first & 0xFF000000) | ((handles.back() & 0x00FFFFFF) + 1);
    if (next <= property) return out;
    property = next;
  }
  return out;
}

void Tpm::watch_held(HeldWatch watch) {
  watch_ = std::move(watch);
  last_held_ = ledger_.held();
  if (watch_ && !last_held_.empty()) watch_(last_held_);
}

void Tpm::note_held() {
  if (!watch_) return;
  std::vector<HeldHandle> now = ledger_.held();
  if (now == last_held_) return;
  last_held_ = std::move(now);
  watch_(last_held_);
}

Status Tpm::sweep() {
  HeldNotice notice(*this);
  if (!ledger_.sweep_pending()) return ok_status();
  if (transport_->private_handles()) {
    // The kernel flushes this client's handles when it closes; session
    // handles there are not ours alone, so nothing listed is known to be ours.
    ledger_.swept();
    return ok_status();
  }
  HandleLedger::Sweep job = ledger_.take_sweep();
  Status result = ok_status();
  if (transport_->in_process()) {
    result = sweep_in_process(job);
  } else {
    result = flush_unflushed(job);
    if (Status st = sweep_sessions(job); !st.ok()) result = st;
    if (Status st = sweep_objects(job); !st.ok()) result = st;
  }
  ledger_.give_back(std::move(job));
  return result;
}

Status Tpm::sweep_in_process(HandleLedger::Sweep& job) {
  // No bus: nobody can hide a handle from the baseline or forge a listing,
  // and nobody else creates handles here. Every handle of a kind at stake
  // that is not owned is a stray, and flushed.
  const uint8_t sessions = HandleLedger::kind_bit(ht::kHmacSession) | HandleLedger::kind_bit(ht::kPolicySession);
  uint8_t kinds = job.kinds;
  for (uint32_t h : job.unflushed) kinds |= HandleLedger::kind_bit(static_cast<uint8_t>(h >> 24));
  if (kinds & sessions) kinds |= sessions;
  Status result = ok_status();
  for (uint32_t first : kListedRanges) {
    if ((kinds & HandleLedger::kind_bit(static_cast<uint8_t>(first >> 24))) == 0) continue;
    TPMSEC_ASSIGN_OR_RETURN(auto listed, list_handles(first));
    for (uint32_t h : ledger_.strays(listed)) {
      auto r = run(cmd::FlushContext{h});
      if (!r.ok() && !handle_gone(r.error())) result = r.error();
    }
  }
  if (result.ok()) job = {};
  return result;
}

Status Tpm::flush_unflushed(HandleLedger::Sweep& job) {
  Status result = ok_status();
  for (auto it = job.unflushed.begin(); it != job.unflushed.end();) {
    auto r = run(cmd::FlushContext{*it});
    if (r.ok() || handle_gone(r.error())) {
      it = job.unflushed.erase(it);
    } else {
      result = r.error();
      ++it;
    }
  }
  return result;
}

Status Tpm::sweep_sessions(HandleLedger::Sweep& job) {
  const uint8_t sessions = HandleLedger::kind_bit(ht::kHmacSession) | HandleLedger::kind_bit(ht::kPolicySession);
  if ((job.kinds & sessions) == 0) return ok_status();
  // A session a lost StartAuthSession created is loaded (nobody could save
  // it), and listed with its type: a saved session, or one of the other
  // type, is never at stake.
  TPMSEC_ASSIGN_OR_RETURN(auto listed, list_handles(ht::kFirstLoadedSession));
  Status result = ok_status();
  for (uint32_t h : ledger_.strays(listed)) {
    if ((job.kinds & HandleLedger::kind_bit(static_cast<uint8_t>(h >> 24))) == 0) continue;
    auto r = run(cmd::FlushContext{h});
    if (!r.ok() && !handle_gone(r.error())) result = r.error();
  }
  if (result.ok()) job.kinds &= static_cast<uint8_t>(~sessions);
  return result;
}

Status Tpm::sweep_objects(HandleLedger::Sweep& job) {
  const uint8_t objects = HandleLedger::kind_bit(ht::kTransient);
  if ((job.kinds & objects) == 0) return ok_status();
  TPMSEC_ASSIGN_OR_RETURN(auto listed, list_handles(ht::kFirstTransient));
  Status result = ok_status();
  for (uint32_t h : ledger_.strays(listed)) {
    auto r = run(cmd::FlushContext{h});
    if (!r.ok() && !handle_gone(r.error())) result = r.error();
  }
  if (result.ok()) job.kinds &= static_cast<uint8_t>(~objects);
  return result;
}

Status Tpm::before_creating() {
  // A stray from an earlier failure goes first: nothing new can be confused with it.
  if (ledger_.sweep_pending()) (void)sweep();
  if (ledger_.has_baseline()) return ok_status();
  std::vector<uint32_t> present;
  if (!transport_->in_process() && !transport_->private_handles()) {
    for (uint32_t first : kListedRanges) {
      auto listed = list_handles(first);
      if (!listed.ok()) return listed.error().with_context("listing the TPM's handles before creating one");
      present.insert(present.end(), listed->begin(), listed->end());
    }
  }
  ledger_.set_baseline(present);
  return ok_status();
}

Error Tpm::after_failure(const CommandInfo& info, const CreatedHandle& created, Error error) {
  // kUsage: refused before anything was sent. Otherwise the TPM may have
  // created a handle of created.type that nobody received, except for a
  // session's ContextLoad, which creates nothing: the session keeps its
  // handle and stays owned, loaded or saved.
  if (info.creates_handle && error.kind() != ErrorKind::kUsage && !created.reloads) {
    ledger_.need_sweep(created.type);
    (void)sweep();
  }
  return error;
}

Result<RawResponse> Tpm::execute(const CommandInfo& info, std::span<const NamedHandle* const> handles, Bytes parameters,
                                 std::span<const Auth> auths) {
  auto delay = std::chrono::milliseconds(20);
  for (int attempt = 0;; ++attempt) {
    auto result = execute_once(info, handles, parameters, auths);
    if (result.ok() || !info.retry_safe || result.error().kind() != ErrorKind::kTpm ||
        !rc_is_retryable(result.error().tpm_rc()) || attempt == kMaxRetries) {
      return result;
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(2000));
  }
}

Result<RawResponse> Tpm::execute_once(const CommandInfo& info, std::span<const NamedHandle* const> handles,
                                      const Bytes& parameters_in, std::span<const Auth> auths) {
  TPMSEC_ASSIGN_OR_RETURN(CipherSessions cipher, check_command(info, handles, auths));
  for (const Auth& a : auths) TPMSEC_RETURN_IF_ERROR(a.session->begin_command());
  // Parameter encryption comes first: cpHash covers the parameters as sent
  // (a copy encrypted; without it the caller's parameters as they are).
  Bytes encrypted;
  ByteView parameters = parameters_in;
  if (cipher.decrypt >= 0) {
    encrypted = parameters_in;
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_parameter_data(encrypted, info.name));
    const Auth& a = auths[cipher.decrypt];
    TPMSEC_RETURN_IF_ERROR(a.session->encrypt_parameter(data, a.auth_value));
    parameters = encrypted;
  }
  // A command that does not fit is refused here: nothing reaches the transport.
  TPMSEC_ASSIGN_OR_RETURN(Bytes command, frame_command(info, handles, parameters, auths, cipher));
  TPMSEC_ASSIGN_OR_RETURN(Bytes response, transport_->transmit(command));
  return read_response(info, response, auths, cipher);
}

}  // namespace tpmsec
