#include "tpmsec/wrap.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wire.h"
#include "wrap/caller_frame.h"

namespace tpmsec {
namespace {

using wrapping::Entry;
using wrapping::kMaxFrame;
using wrapping::kMaxSessions;

// Command codes whose handling differs, by name from the command table.
namespace cc {
constexpr uint32_t kNvUndefineSpaceSpecial = command_code("NV_UndefineSpaceSpecial");
constexpr uint32_t kEvictControl = command_code("EvictControl");
constexpr uint32_t kNvUndefineSpace = command_code("NV_UndefineSpace");
constexpr uint32_t kHierarchyChangeAuth = command_code("HierarchyChangeAuth");
constexpr uint32_t kCreatePrimary = command_code("CreatePrimary");
constexpr uint32_t kNvGlobalWriteLock = command_code("NV_GlobalWriteLock");
constexpr uint32_t kNvIncrement = command_code("NV_Increment");
constexpr uint32_t kNvSetBits = command_code("NV_SetBits");
constexpr uint32_t kNvExtend = command_code("NV_Extend");
constexpr uint32_t kNvWrite = command_code("NV_Write");
constexpr uint32_t kNvWriteLock = command_code("NV_WriteLock");
constexpr uint32_t kNvChangeAuth = command_code("NV_ChangeAuth");
constexpr uint32_t kStartup = command_code("Startup");
constexpr uint32_t kNvReadLock = command_code("NV_ReadLock");
constexpr uint32_t kLoad = command_code("Load");
constexpr uint32_t kContextLoad = command_code("ContextLoad");
constexpr uint32_t kFlushContext = command_code("FlushContext");
constexpr uint32_t kGetCapability = command_code("GetCapability");
constexpr uint32_t kLoadExternal = command_code("LoadExternal");
constexpr uint32_t kNvReadPublic = command_code("NV_ReadPublic");
constexpr uint32_t kReadPublic = command_code("ReadPublic");
constexpr uint32_t kStartAuthSession = command_code("StartAuthSession");
constexpr uint32_t kCreateLoaded = command_code("CreateLoaded");
constexpr uint32_t kHashSequenceStart = command_code("HashSequenceStart");
constexpr uint32_t kHmacStart = command_code("HMAC_Start");
}  // namespace cc

// NV commands that change an index's attributes (TPMA_NV_WRITTEN, the
// locks), and so its Name (Part 1 §16: nameAlg || H(TPMS_NV_PUBLIC)).
bool changes_nv_name(uint32_t code) {
  return code == cc::kNvWrite || code == cc::kNvIncrement || code == cc::kNvSetBits || code == cc::kNvExtend ||
         code == cc::kNvWriteLock || code == cc::kNvReadLock;
}

// A caller's HMAC or policy session entry with an empty HMAC that neither
// audits nor encrypts: the TPM accepts an empty HMAC only from a session
// whose HMAC key is empty (no sessionKey, no authValue included), and then
// checks nothing of cpHash or the nonces, and answers with an empty HMAC
// too (the reference code's ComputeCommandHMAC and ComputeResponseHMAC,
// SessionProcess.c). Parameters encrypted beside it change nothing it
// proves: the entry goes out, and comes back, as it is. With any other key
// the TPM refuses it, as it would have without the wrapper.
bool empty_key_entry(const Entry& e) {
  return ht::is_session(e.handle) && e.hmac.empty() && !(e.attributes & ~attr::kContinueSession);
}

// Commands whose response handle is a new sequence object (Part 3 §17).
bool starts_sequence(uint32_t code) {
  return code == cc::kHashSequenceStart || code == cc::kHmacStart;
}

// The handle whose Name a handle's own bytes are (Part 1 §16).
bool named_by_handle(uint32_t handle) {
  uint8_t type = static_cast<uint8_t>(handle >> 24);
  return type == ht::kPcr || type == ht::kPermanent || type == ht::kHmacSession || type == ht::kPolicySession;
}

// The session (0-based) a response code names as gone: TPM_RC_REFERENCE_Sn,
// or TPM_RC_HANDLE / TPM_RC_VALUE with its session bit (Part 2 §6.6.3).
std::optional<size_t> session_gone(uint32_t code) {
  constexpr uint32_t kReferenceS0 = 0x918, kReferenceS6 = 0x91E;
  if (code >= kReferenceS0 && code <= kReferenceS6) return code - kReferenceS0;
  if (!(code & 0x080) || (code & 0x040) || !(code & 0x800)) return std::nullopt;
  uint32_t base = rc_base(code);
  if (base != rc::kHandle && base != rc::kValue) return std::nullopt;
  uint32_t number = (code >> 8) & 0x7;
  if (number == 0) return std::nullopt;
  return number - 1;
}

// The Name a response of an authenticated name-returning command carries
// (Part 3: §24.1 CreatePrimary, §12.2 Load, §12.9 CreateLoaded, §12.3
// LoadExternal, §12.4 ReadPublic, §31.6 NV_ReadPublic), or nothing.
std::optional<Bytes> name_in_response(uint32_t code, ByteView params) {
  Reader r(params);
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

}  // namespace

// What unwrap() needs of the command wrap() sent.
struct CommandWrapper::Pending {
  uint32_t code = 0;
  const CommandInfo* info = nullptr;
  bool passed_through = true;
  bool caller_sessions = false;  // the caller's tag was TPM_ST_SESSIONS
  bool caller_hmac = false;      // ... and it holds an HMAC or policy session of the caller's
  size_t sent_sessions = 0;      // entries in the frame sent
  size_t our_slot = 0;
  bool replaced_password = false;
  uint8_t password_attributes = 0;  // of the caller's replaced password entry
  bool encrypts_response = false;
  SecretBytes auth_value;
  std::optional<SecretBytes> new_auth_value;
  std::vector<uint32_t> handles;
  uint32_t flushed = 0;  // FlushContext's flushHandle
  // The caller's sessions sent without continueSession: the TPM ends them
  // when the command succeeds (Part 1 §19.6.4), and may reuse their handles.
  std::vector<uint32_t> ending;
  // The caller's re-signable sessions in this command: slot and handle.
  std::vector<std::pair<size_t, uint32_t>> caller_tracked;
  bool resigned = false;
  // A StartAuthSession for an unsalted, unbound HMAC session: its authHash.
  uint16_t unsalted_session_hash = 0;
};

// Gives a caller's session object the caller's own nonceCaller, so that
// HmacSession computes the caller's HMAC as the caller did.
class CommandWrapper::CallerNonce final : public crypto::RandomSource {
 public:
  void set(ByteView nonce) { nonce_.assign(nonce.begin(), nonce.end()); }
  Status fill(MutableByteView out) override {
    if (out.size() != nonce_.size()) return usage_error("the caller's nonce is not the size of nonceTPM");
    std::copy(nonce_.begin(), nonce_.end(), out.begin());
    return ok_status();
  }

 private:
  Bytes nonce_;
};

CommandWrapper::CommandWrapper(SessionFactory& factory)
    : factory_(&factory), caller_nonce_(std::make_unique<CallerNonce>()) {}

CommandWrapper::~CommandWrapper() { retire_session(/*may_exist=*/true); }

void CommandWrapper::forget_object_names() {
  std::erase_if(names_, [](const auto& n) { return (n.first >> 24) == ht::kTransient; });
}

uint32_t CommandWrapper::session_handle() const { return session_ ? session_->handle() : 0; }

Status CommandWrapper::ensure_session() {
  TPMSEC_RETURN_IF_ERROR(load_session());
  if (session_ && session_->usable()) return ok_status();
  retire_session(/*may_exist=*/true);
  // Each command sets the attributes it carries. The check that the TPM
  // uses the cipher asked for waits for the first command that carries
  // parameter encryption (ensure_cipher_checked): a program that never
  // sends a secret (tpm2_pcrextend) does not pay for it.
  auto start = [&] {
    return factory_->start(attr::kContinueSession | attr::kAudit, SessionFactory::CipherCheck::kDeferred);
  };
  auto started = start();
  if (!started.ok() && started.error().tpm_rc() == rc::kSessionMemory) {
    TPMSEC_RETURN_IF_ERROR(make_room());
    started = start();
  }
  TPMSEC_ASSIGN_OR_RETURN(session_, std::move(started));
  cipher_checked_ = false;
  ++sessions_started_;
  return ok_status();
}

Status CommandWrapper::ensure_cipher_checked() {
  if (cipher_checked_) return ok_status();
  if (Status st = factory_->check_cipher(*session_); !st.ok()) {
    // Altered on the bus, or lost: no parameter is encrypted under it.
    retire_session(/*may_exist=*/true);
    return st;
  }
  cipher_checked_ = true;
  return ok_status();
}

void CommandWrapper::retire_session(bool may_exist) {
  saved_.reset();
  if (!session_) return;
  if (may_exist) {
    // Only this wrapper's own handle; gone already counts as flushed.
    (void)session_->flush();
  } else {
    session_->abandon();
  }
  session_.reset();
}

Result<Bytes> CommandWrapper::name_of(uint32_t handle) {
  if (named_by_handle(handle)) return be32(handle);
  if (auto it = names_.find(handle); it != names_.end()) return it->second;
  uint8_t type = static_cast<uint8_t>(handle >> 24);
  const CommandInfo& info = type == ht::kNvIndex ? cmd::NvReadPublic::kInfo : cmd::ReadPublic::kInfo;
  if (type != ht::kNvIndex && type != ht::kTransient && type != ht::kPersistent) {
    return unsupported_error(fmt::format("no Name for handle 0x{:08x}", handle));
  }
  Tpm& tpm = factory_->tpm();
  // The Name enters the audited read's own cpHash, so a first read proposes
  // it; the TPM accepting the audited read's HMAC is what confirms it, and
  // the name kept is the one in that authenticated response.
  NamedHandle proposed = NamedHandle::of(handle);
  const NamedHandle* one[] = {&proposed};
  TPMSEC_ASSIGN_OR_RETURN(RawResponse first, tpm.execute(info, one, {}, {}));
  std::optional<Bytes> candidate = name_in_response(info.code, first.parameters);
  if (!candidate) return parse_error(fmt::format("{}(0x{:08x}) carries no Name", info.name, handle));
  proposed.name = *candidate;
  auto read_audited = [&]() -> Result<RawResponse> {
    TPMSEC_RETURN_IF_ERROR(ensure_session());
    session_->set_attributes(attr::kContinueSession | attr::kAudit);
    Auth audit{session_.get(), {}};
    return tpm.execute(info, one, {}, std::span<const Auth>(&audit, 1));
  };
  auto audited = read_audited();
  if (!audited.ok() && audited.error().kind() == ErrorKind::kTpm && session_gone(audited.error().tpm_rc()) == 0) {
    // The session was flushed behind the wrapper's back: a new one, once.
    retire_session(/*may_exist=*/true);
    audited = read_audited();
  }
  if (!audited.ok()) return audited.error();
  std::optional<Bytes> name = name_in_response(info.code, audited->parameters);
  if (!name || *name != proposed.name) {
    return integrity_error(fmt::format("audited {}(0x{:08x}) answered another Name", info.name, handle));
  }
  names_[handle] = *name;
  return std::move(*name);
}

void CommandWrapper::track_caller_session(uint32_t handle, uint16_t auth_hash, ByteView nonce_tpm) {
  caller_sessions_[handle] = std::make_unique<HmacSession>(nullptr, handle, auth_hash, SymDef{}, SecretBytes(),
                                                           Bytes(nonce_tpm.begin(), nonce_tpm.end()), Bytes(), 0,
                                                           caller_nonce_.get());
  keep_caller_session(handle);
}

Result<HmacSession*> CommandWrapper::caller_session(uint32_t handle) {
  if (auto it = caller_sessions_.find(handle); it != caller_sessions_.end()) return it->second.get();
  // Started by an earlier process of the program (kept_sessions_).
  if (!kept_sessions_) return nullptr;
  TPMSEC_ASSIGN_OR_RETURN(std::optional<KeptCallerSession> kept, kept_sessions_->caller_session(handle));
  if (!kept || !digest_size(kept->auth_hash)) return nullptr;
  auto& s = caller_sessions_[handle];
  s = std::make_unique<HmacSession>(nullptr, handle, kept->auth_hash, SymDef{}, SecretBytes(), kept->nonce_tpm,
                                    Bytes(), 0, caller_nonce_.get());
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
  // Only a session's handle has a kept record (a flushed object has none).
  if (kept_sessions_ && ht::is_session(handle)) (void)kept_sessions_->drop_caller_session(handle);
}

Result<bool> CommandWrapper::caller_entry_verifies(uint32_t handle, uint8_t attributes, ByteView nonce, ByteView raw,
                                                   const AuthorizeInput& in) {
  TPMSEC_ASSIGN_OR_RETURN(HmacSession* s, caller_session(handle));
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

// No Name, no command: nothing of the caller's frame goes out without the
// wrapper's session, whatever the TPM (or the bus) answered the read. The
// TPM's error about the handle (TPM_RC_HANDLE for an object that is not
// loaded, TPM_RC_SEQUENCE for a sequence the wrapper did not see start) is
// the caller's command's error, numbered for its handle: it only ever makes
// that command fail, as the TPM would have. Anything else (the wrapper's own
// session refused, an answer that does not authenticate) is the wrapper's.
Error CommandWrapper::refusal_for_name(const Error& e, size_t index, uint32_t handle, const CommandInfo& info) {
  uint32_t code = e.tpm_rc();
  bool about_handle = e.kind() == ErrorKind::kTpm && rc_is_about_handle_or_command(code);
  std::string what = fmt::format("no authenticated Name for 0x{:08x}, so {} was not sent", handle, info.name);
  if (about_handle) return Error(ErrorKind::kTpm, what, rc_for_handle(code, index));
  return e.with_context(what);
}

Error CommandWrapper::strict_refusal(const CommandInfo& info, std::string_view why) {
  ++counts_[info.code].refused;
  return unsupported_error(fmt::format("strict: {} refused, not sent: {} would cross the bus in clear", info.name, why))
      .with_reason(ErrorReason::kSecretInClear);
}

Result<Bytes> CommandWrapper::wrap(ByteView command) {
  pending_.reset();
  HeaderRead hr = read_frame_header(command, kMaxFrame);
  if (hr.check != FrameCheck::kOk || hr.header.size != command.size()) {
    return usage_error(fmt::format("a command frame of {} bytes whose header is not a TPM command's", command.size()));
  }
  auto p = std::make_unique<Pending>();
  p->code = hr.header.code;
  p->caller_sessions = hr.header.tag == st::kSessions;
  p->info = find_command(p->code);
  WrapCounts& counts = counts_[p->code];
  auto pass = [&]() -> Result<Bytes> {
    if (strict_ && p->info) {
      // Sent as the caller gave it: every secret in it crosses in clear. A
      // frame the codec cannot read, the TPM refuses anyway.
      if (auto areas = read_command_areas(command, kMaxFrame); areas.ok()) {
        std::string why = wrapping::secret_in_clear(*p->info, areas->sessions, areas->parameters, std::nullopt,
                                                    /*decrypt=*/false, /*encrypt=*/false);
        if (!why.empty()) return strict_refusal(*p->info, why);
      }
    }
    ++counts.passed_through;
    p->passed_through = true;
    pending_ = std::move(p);
    return Bytes(command.begin(), command.end());
  };
  if (p->code == cc::kFlushContext && command.size() >= kFrameHeaderBytes + 4) {
    p->flushed = load_be32(command.data() + kFrameHeaderBytes);
    names_.erase(p->flushed);
  }
  if (!p->info || p->info->no_sessions) return pass();
  const CommandInfo& info = *p->info;

  // The caller's frame (caller_frame.h): anything it gets wrong, the TPM
  // answers as before; where the wrapper's session has no place, the command
  // goes out as the caller gave it.
  std::optional<CommandAreas> frame = wrapping::read_caller_frame(command);
  if (!frame) return pass();
  std::optional<wrapping::SlotPlan> plan = wrapping::plan_slot(frame->sessions, info);
  if (!plan) return pass();
  p->handles = frame->handles;
  const std::vector<Entry>& sessions = frame->sessions;
  const ByteView params = frame->parameters;
  for (const Entry& e : sessions) {
    if (e.handle != rh::kPasswordSession && !(e.attributes & attr::kContinueSession)) p->ending.push_back(e.handle);
  }
  bool caller_hmac = plan->caller_hmac;
  p->caller_hmac = plan->caller_hmac;

  // The sessions this command uses keep their slots (session_room.cc).
  busy_.assign(p->handles.begin(), p->handles.end());
  for (const Entry& e : sessions) busy_.push_back(e.handle);

  // Names (may read one through the session), then the session itself.
  std::vector<NamedHandle> named(p->handles.size());
  for (size_t i = 0; i < p->handles.size(); ++i) {
    auto name = name_of(p->handles[i]);
    if (!name.ok()) return refusal_for_name(name.error(), i, p->handles[i], info);
    named[i] = NamedHandle{p->handles[i], std::move(*name)};
  }
  TPMSEC_RETURN_IF_ERROR(ensure_session());
  // Nothing to save is no reason to fail: the TPM answers the resend.
  if (need_room_) (void)make_room();
  std::vector<const NamedHandle*> handle_ptrs;
  for (const NamedHandle& h : named) handle_ptrs.push_back(&h);
  auto input_for = [&](size_t slot, ByteView parameters, ByteView auth_value) {
    AuthorizeInput in;
    in.info = &info;
    in.handles = handle_ptrs;
    in.parameters = parameters;
    in.entity = slot < info.auth_count ? &named[slot] : nullptr;
    in.auth_value = auth_value;
    return in;
  };

  // The caller's HMAC sessions the wrapper can re-sign (wrap.h): then the
  // caller's sessions do not stop parameter encryption.
  bool resignable = true;
  for (size_t i = 0; i < sessions.size(); ++i) {
    const Entry& e = sessions[i];
    if (e.handle == rh::kPasswordSession) continue;
    TPMSEC_ASSIGN_OR_RETURN(bool verifies,
                            caller_entry_verifies(e.handle, e.attributes, e.nonce, e.raw, input_for(i, params, {})));
    if (verifies) {
      p->caller_tracked.emplace_back(i, e.handle);
    } else if (!empty_key_entry(e)) {
      resignable = false;
    }
  }
  if (caller_hmac && resignable) caller_hmac = false;
  p->unsalted_session_hash = wrapping::computable_session_hash(p->code, p->handles, params);

  if (const std::optional<size_t>& password_slot = plan->password_slot) {
    p->our_slot = *password_slot;
    p->replaced_password = true;
    p->password_attributes = sessions[*password_slot].attributes;
    p->auth_value = SecretBytes(sessions[*password_slot].hmac);  // a password entry's hmac is the authValue
    p->sent_sessions = sessions.size();
  } else {
    p->our_slot = sessions.size();
    p->sent_sessions = sessions.size() + 1;
  }
  bool authorizes = p->our_slot < info.auth_count;
  bool decrypt = !caller_hmac && info.command_param_tpm2b && params.size() >= 2;
  p->encrypts_response = !caller_hmac && info.response_param_tpm2b;
  // The session authorizing the entity (slot 0) is answered under its new
  // authValue, the wrapper's or a re-signed caller's.
  if (p->code == cc::kHierarchyChangeAuth || p->code == cc::kNvChangeAuth) {
    Reader nr(params);
    p->new_auth_value = SecretBytes(nr.tpm2b("newAuth", 64));
    if (!nr.ok()) return pass();
  }
  if (strict_) {
    std::string why = wrapping::secret_in_clear(info, sessions, params, plan->password_slot, decrypt,
                                                p->encrypts_response);
    if (!why.empty()) return strict_refusal(info, why);
  }
  forget_names_changed_by(p->code, p->handles, params);

  if (decrypt || p->encrypts_response) TPMSEC_RETURN_IF_ERROR(ensure_cipher_checked());
  // The session ends with this command when it is the one the front end
  // said would be the last (end_session_with()).
  bool last = end_with_ && commands_ == *end_with_ && !saved_ && !evicted_ && !need_room_;
  session_->set_attributes((last ? 0 : attr::kContinueSession) | (plan->caller_audits ? 0 : attr::kAudit) |
                           (decrypt ? attr::kDecrypt : 0) | (p->encrypts_response ? attr::kEncrypt : 0));
  TPMSEC_RETURN_IF_ERROR(session_->begin_command());
  SecretBytes parameters(params);  // may hold a secret the bus must not see
  ByteView auth_value = authorizes ? p->auth_value.view() : ByteView();
  if (decrypt) {
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_parameter_data(parameters.mutable_view(), info.name));
    TPMSEC_RETURN_IF_ERROR(session_->encrypt_parameter(data, auth_value));
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes ours, session_->authorize(input_for(p->our_slot, parameters.view(), auth_value)));
  // The caller's sessions, re-signed over the parameters as sent; the first
  // (when it is not the wrapper's) also covers the wrapper's nonceTPM for
  // decrypt and encrypt (Part 1 §19.6.5), once when one session carries both.
  std::vector<Bytes> resigned(sessions.size());
  if (decrypt || p->encrypts_response) {
    p->resigned = true;
    for (auto [slot, handle] : p->caller_tracked) {
      AuthorizeInput in = input_for(slot, parameters.view(), {});
      if (slot == 0) {
        if (decrypt) in.decrypt_nonce = session_->nonce_tpm();
        if (p->encrypts_response && !decrypt) in.encrypt_nonce = session_->nonce_tpm();
      }
      TPMSEC_ASSIGN_OR_RETURN(resigned[slot], resign_caller_entry(handle, sessions[slot].nonce, in));
    }
  }

  std::vector<ByteView> entries(p->sent_sessions);
  for (size_t i = 0; i < p->sent_sessions; ++i) {
    entries[i] = i == p->our_slot ? ByteView(ours) : !resigned[i].empty() ? ByteView(resigned[i]) : sessions[i].raw;
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes out, wrapping::build_command_frame(p->code, p->handles, entries, parameters.view()));

  ++counts.wrapped;
  if (decrypt || p->encrypts_response) ++counts.encrypted;
  if (p->replaced_password) ++counts.passwords_replaced;
  counts.passwords_left += plan->passwords - (p->replaced_password ? 1 : 0);
  p->passed_through = false;
  pending_ = std::move(p);
  last_wrapped_ = commands_;
  return out;
}

void CommandWrapper::forget_names_changed_by(uint32_t code, const std::vector<uint32_t>& handles, ByteView params) {
  if (code == cc::kEvictControl && params.size() >= 4) names_.erase(load_be32(params.data()));
  if (code == cc::kNvUndefineSpace && handles.size() == 2) names_.erase(handles[1]);
  if (code == cc::kNvUndefineSpaceSpecial && !handles.empty()) names_.erase(handles[0]);
  if (changes_nv_name(code) && handles.size() == 2) names_.erase(handles[1]);
  if (code == cc::kNvGlobalWriteLock) std::erase_if(names_, [](const auto& n) { return (n.first >> 24) == ht::kNvIndex; });
}

void CommandWrapper::note_response_handles(const Pending& p, ByteView response) {
  // Another client's handles (the caller's) are never this wrapper's to
  // flush, not even by a sweep (handle_ledger.h); a FlushContext the TPM
  // accepted frees its number.
  Tpm& tpm = factory_->tpm();
  if (p.code == cc::kFlushContext && p.flushed) {
    tpm.foreign_flushed(p.flushed);
    forget_caller_session(p.flushed);
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
    callers_loaded_.erase(h);
  }
  uint8_t count = p.info ? p.info->response_handle_count : 0;
  if (p.code == cc::kContextLoad) count = 1;
  if (count == 1 && response.size() >= kFrameHeaderBytes + 4) {
    uint32_t h = load_be32(response.data() + kFrameHeaderBytes);
    tpm.note_foreign(h);
    if (p.code == cc::kContextLoad) names_.erase(h);
    if (ht::is_session(h)) callers_loaded_.insert(h);
  }
}

Result<Bytes> CommandWrapper::unwrap(ByteView response) {
  if (!pending_) return usage_error("a response without a command");
  auto out = unwrap_checked(response);
  pending_.reset();
  restore_room();
  return out;
}

Result<Bytes> CommandWrapper::unwrap_checked(ByteView response) {
  Pending& p = *pending_;
  HeaderRead hr = read_frame_header(response, kMaxFrame);
  if (hr.check != FrameCheck::kOk || hr.header.size != response.size()) {
    if (!p.passed_through) retire_session(/*may_exist=*/true);
    return parse_error(fmt::format("the response to 0x{:x} is not a TPM response ({} bytes)", p.code,
                                   response.size()));
  }
  uint32_t code = hr.header.code;
  if (p.passed_through) {
    if (code == rc::kSuccess) {
      note_response_handles(p, response);
      // The caller flushed the wrapper's session (tpm2_flushcontext -s): the
      // next command starts another. Flushed again in case the success was
      // forged; gone counts as flushed.
      if (p.code == cc::kFlushContext && session_ && p.flushed == session_->handle()) retire_session(true);
      // A Startup means a TPM Reset or Restart: no session survived it.
      if (p.code == cc::kStartup) retire_session(true);
    }
    return Bytes(response.begin(), response.end());
  }
  const CommandInfo& info = *p.info;
  if (code != rc::kSuccess) {
    // An error carries no session area (Part 1 §18.10) and is the caller's,
    // unchanged, session numbers included (the wrapper's slot is the one the
    // caller's password had, or after the caller's sessions).
    if (response.size() != kFrameHeaderBytes) {
      retire_session(true);
      return parse_error(fmt::format("{} response: error 0x{:x} with {} more bytes", info.name, code,
                                     response.size() - kFrameHeaderBytes));
    }
    session_->command_failed(code);
    std::optional<size_t> gone = session_gone(code);
    std::optional<size_t> failed = rc_failed_session(code);
    if ((gone && *gone == p.our_slot) || (failed && *failed == p.our_slot && !p.replaced_password)) {
      // A Name may be stale (an index written by another client): read again.
      for (uint32_t h : p.handles) names_.erase(h);
    }
    if (gone && *gone == p.our_slot) {
      retire_session(true);
      session_lost_ = true;
    }
    return Bytes(response.begin(), response.end());
  }
  if (hr.header.tag != st::kSessions) {
    retire_session(true);
    return integrity_error(fmt::format("{} response has no session area: it cannot be authenticated", info.name));
  }
  Reader r(response.subspan(kFrameHeaderBytes), kFrameHeaderBytes);
  ByteView handles = r.bytes(size_t{info.response_handle_count} * 4, "response handles");
  uint32_t param_size = r.u32("parameterSize");
  if (r.ok() && param_size > r.remaining()) r.fail("parameterSize exceeds the response");
  ByteView params = r.bytes(param_size, "response parameters");
  std::array<Entry, kMaxSessions> entries;
  for (size_t i = 0; i < p.sent_sessions; ++i) entries[i] = read_auth_entry(r, response, /*command=*/false);
  r.expect_end("response");
  if (!r.ok()) {
    retire_session(true);
    return r.status().error().with_context(std::string(info.name) + " response");
  }

  // Authenticated before a byte of it goes anywhere.
  const Entry& e = entries[p.our_slot];
  bool authorizes = p.our_slot < info.auth_count;
  VerifyInput in{&info, code, params, AuthResponse{e.nonce, e.attributes, e.hmac},
                 authorizes ? p.auth_value.view() : ByteView()};
  if (p.new_auth_value && p.our_slot == 0) in.new_auth_value = p.new_auth_value->view();
  if (Status st = session_->verify(in); !st.ok()) {
    retire_session(true);
    return st.error().with_context(std::string(info.name) + " response");
  }
  SecretBytes plain(params);
  if (p.encrypts_response) {
    TPMSEC_ASSIGN_OR_RETURN(MutableByteView data, first_parameter_data(plain.mutable_view(), info.name));
    TPMSEC_RETURN_IF_ERROR(session_->decrypt_parameter(data, authorizes ? p.auth_value.view() : ByteView()));
  }
  // The caller's tracked sessions: the TPM's HMAC for each checked (their
  // nonces roll only on an answer that verifies), and re-signed over the
  // response the caller gets.
  std::array<Bytes, kMaxSessions> caller_entries;
  for (auto [slot, handle] : p.caller_tracked) {
    HmacSession& s = *caller_sessions_.at(handle);
    const Entry& ce = entries[slot];
    VerifyInput cin{&info, code, params, AuthResponse{ce.nonce, ce.attributes, ce.hmac}, {}};
    if (p.new_auth_value && slot == 0) cin.new_auth_value = p.new_auth_value->view();
    Status st = s.verify(cin);
    if (!st.ok()) {
      forget_caller_session(handle);
      retire_session(true);
      return st.error().with_context(std::string(info.name) + " response (the caller's session)");
    }
    if (p.resigned) {
      cin.parameters = plain.view();
      TPMSEC_ASSIGN_OR_RETURN(Bytes mac, s.response_hmac(cin));
      Writer ew;
      ew.tpm2b(ce.nonce, "nonce", 64);
      ew.u8(ce.attributes);
      ew.tpm2b(mac, "hmac", 64);
      TPMSEC_ASSIGN_OR_RETURN(caller_entries[slot], ew.finish());
    }
    if (s.usable()) {
      keep_caller_session(handle);  // its nonce rolled
    } else {
      forget_caller_session(handle);  // ended without continueSession
    }
  }
  if (p.unsalted_session_hash && info.response_handle_count == 1) {
    Reader nr(plain.view());
    ByteView nonce_tpm = nr.tpm2b("nonceTPM", 64);
    if (nr.ok() && !nonce_tpm.empty()) track_caller_session(load_be32(handles.data()), p.unsalted_session_hash, nonce_tpm);
  }

  if (starts_sequence(p.code) && info.response_handle_count == 1) {
    // A sequence object's Name is the Empty Buffer (the TPM gives it no
    // nameAlg; libtpms and the reference code, EntityGetName): known from
    // this authenticated answer, so its SequenceUpdate and SequenceComplete
    // go out wrapped too. A response handle is not in rpHash: a swapped one
    // names another handle, whose commands the TPM then refuses (cpHash).
    names_[load_be32(handles.data())] = Bytes();
  } else if (std::optional<Bytes> name = name_in_response(p.code, plain.view())) {
    if (info.response_handle_count == 1) {
      names_[load_be32(handles.data())] = std::move(*name);
    } else if (!p.handles.empty() && (p.code == cc::kReadPublic || p.code == cc::kNvReadPublic)) {
      names_[p.handles[0]] = std::move(*name);
    }
  }
  note_response_handles(p, response);
  // The wrapper's own session is not the caller's to see (nor to flush: it
  // may end with this very command): a handle listing the caller gets
  // without it, as it would without the wrapper. Not under a session of the
  // caller's, whose response HMAC covers the listing as the TPM gave it.
  if (p.code == cc::kGetCapability && !p.caller_hmac) {
    if (std::optional<Bytes> listing = wrapping::listing_without(plain.view(), session_->handle())) {
      plain = SecretBytes(*listing);
    }
  }
  // A command sent without continueSession ended the session (its response
  // verified): the next command starts another.
  if (!session_->usable()) retire_session(/*may_exist=*/false);

  // The response the caller would have had.
  Writer w(kMaxFrame, "response");
  bool caller_sessions = p.caller_sessions;
  w.u16(caller_sessions ? st::kSessions : st::kNoSessions);
  auto size_mark = w.begin_total_size32("responseSize");
  w.u32(code);
  w.bytes(handles, "response handles");
  if (caller_sessions) {
    auto param_mark = w.begin_size32("parameterSize");
    w.bytes(plain.view(), "parameters");
    w.end_size(param_mark);
    for (size_t i = 0; i < p.sent_sessions; ++i) {
      if (i != p.our_slot) {
        w.bytes(caller_entries[i].empty() ? entries[i].raw : ByteView(caller_entries[i]), "TPMS_AUTH_RESPONSE");
      } else if (p.replaced_password) {
        // A password session's response: empty nonce, continueSession, empty hmac (Part 1 §19.8.5).
        w.u16(0);
        w.u8(attr::kContinueSession);
        w.u16(0);
      }
    }
  } else {
    w.bytes(plain.view(), "parameters");
  }
  w.end_size(size_mark);
  return w.finish();
}

void CommandWrapper::response_lost() {
  if (pending_ && !pending_->passed_through) retire_session(/*may_exist=*/true);
  pending_.reset();
  restore_room();
}

Result<Bytes> CommandWrapper::exchange(Transport& transport, ByteView command) {
  ++commands_;
  for (int attempt = 0;; ++attempt) {
    session_lost_ = false;
    auto wrapped = wrap(command);
    if (!wrapped.ok()) {
      restore_room();
      // Refused with the TPM's own error about one of its handles: the
      // caller's answer, nothing of its command sent (refusal_for_name).
      if (wrapped.error().kind() == ErrorKind::kTpm) return error_frame(wrapped.error().tpm_rc());
      return wrapped.error();
    }
    Bytes frame = std::move(*wrapped);
    const CommandInfo* info = pending_ ? pending_->info : nullptr;
    bool passed = pending_ && pending_->passed_through;
    auto response = transport.transmit(frame);
    if (!response.ok()) {
      response_lost();
      return response.error();
    }
    TPMSEC_ASSIGN_OR_RETURN(Bytes out, unwrap(*response));
    // The TPM refused the command for the wrapper's session alone, before
    // running it (Part 1 §18.6); the code is not authenticated, so only a
    // command that changes nothing is sent again.
    if (session_lost_ && attempt == 0 && info && info->retry_safe) continue;
    // No slot for a caller's new or reloaded session while the wrapper's
    // holds one (session_room.cc): once more after making room.
    if (attempt == 0 && info && (info->code == cc::kStartAuthSession || info->code == cc::kContextLoad) &&
        out.size() >= kFrameHeaderBytes && load_be32(out.data() + 6) == rc::kSessionMemory) {
      if (passed && session_ && !saved_) {
        save_session_for_room();
        continue;
      }
      if (!passed) {
        need_room_ = true;
        continue;
      }
    }
    return out;
  }
}

std::string CommandWrapper::counts_report() const {
  std::string out;
  for (const auto& [code, c] : counts_) {
    const CommandInfo* info = find_command(code);
    out += fmt::format("{} 0x{:08x} wrapped={} encrypted={} passed={} passwords={} clear-passwords={}{}\n",
                       info ? info->name : std::string_view("unknown"), code, c.wrapped, c.encrypted,
                       c.passed_through, c.passwords_replaced, c.passwords_left,
                       c.refused ? fmt::format(" refused={}", c.refused) : std::string());
  }
  return out;
}

}  // namespace tpmsec
