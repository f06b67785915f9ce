// CommandWrapper's name cache (wrap.h): every handle's Name enters cpHash.
// PCRs, permanent handles and sessions are named by their handle; objects
// and NV indices by Names taken only from responses the wrapper's session
// authenticated, or read first with an audited ReadPublic / NV_ReadPublic.
// Commands that change or end what a handle names make its Name stale.
#include <fmt/format.h>

#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wrap.h"
#include "wrap/wrap_state.h"

namespace tpmsec {
namespace {

// NV commands that change an index's attributes (TPMA_NV_WRITTEN, the
// locks), and so its Name (Part 1 §16: nameAlg || H(TPMS_NV_PUBLIC)).
bool changes_nv_name(uint32_t code) {
  return code == cc::kNvWrite || code == cc::kNvIncrement || code == cc::kNvSetBits || code == cc::kNvExtend ||
         code == cc::kNvWriteLock || code == cc::kNvReadLock;
}

// Commands whose response handle is a new sequence object (Part 3 §17).
bool starts_sequence(uint32_t code) { return code == cc::kHashSequenceStart || code == cc::kHmacStart; }

// The handle whose Name a handle's own bytes are (Part 1 §16).
bool named_by_handle(uint32_t handle) {
  uint8_t type = static_cast<uint8_t>(handle >> 24);
  return type == ht::kPcr || type == ht::kPermanent || type == ht::kHmacSession || type == ht::kPolicySession;
}

}  // namespace

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
  if (!audited.ok() && audited.error().kind() == ErrorKind::kTpm &&
      wrapping::session_gone(audited.error().tpm_rc()) == 0) {
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

Result<std::vector<NamedHandle>> CommandWrapper::names_of(const std::vector<uint32_t>& handles,
                                                          const CommandInfo& info) {
  std::vector<NamedHandle> named(handles.size());
  for (size_t i = 0; i < handles.size(); ++i) {
    auto name = name_of(handles[i]);
    if (!name.ok()) return refusal_for_name(name.error(), i, handles[i], info);
    named[i] = NamedHandle{handles[i], std::move(*name)};
  }
  return named;
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

void CommandWrapper::forget_names_changed_by(uint32_t code, const std::vector<uint32_t>& handles, ByteView params) {
  // Read only for the command it concerns: a Reader that runs off a short
  // parameter area (GetRandom's 2 bytes) formats an error message, which
  // cost every other command about 1,700 instructions.
  if (code == cc::kEvictControl) {
    Reader r(params);
    uint32_t persistent = r.u32("persistentHandle");
    if (r.ok()) names_.erase(persistent);
  }
  if (code == cc::kNvUndefineSpace && handles.size() == 2) names_.erase(handles[1]);
  if (code == cc::kNvUndefineSpaceSpecial && !handles.empty()) names_.erase(handles[0]);
  if (changes_nv_name(code) && handles.size() == 2) names_.erase(handles[1]);
  if (code == cc::kNvGlobalWriteLock)
    std::erase_if(names_, [](const auto& n) { return (n.first >> 24) == ht::kNvIndex; });
  // A new index under a handle whose Name is still cached (defined and
  // undefined by another client, or by a Clear): its Name is the new one's.
  if (code == cc::kNvDefineSpace) {
    Reader d(params);
    (void)d.tpm2b("auth", 1024);
    (void)d.u16("publicInfo.size");
    uint32_t index = d.u32("nvIndex");
    if (d.ok()) names_.erase(index);
  }
  // Clear undefines the owner's indices and evicts the owner's and the
  // endorsement's persistent objects; ChangePPS and ChangeEPS evict a
  // hierarchy's persistent objects (Part 3 §24.6, §24.7, §24.8): a later
  // object or index under the same handle has another Name.
  if (code == cc::kClear || code == cc::kChangePPS || code == cc::kChangeEPS) forget_nv_and_persistent_names();
}

void CommandWrapper::forget_nv_and_persistent_names() {
  std::erase_if(names_, [](const auto& n) {
    uint8_t type = static_cast<uint8_t>(n.first >> 24);
    return type == ht::kNvIndex || type == ht::kPersistent;
  });
}

void CommandWrapper::note_names_in_response(const Pending& p, const ResponseAreas& areas, ByteView parameters) {
  const bool creates = p.info->response_handle_count == 1 && !areas.handles.empty();
  if (starts_sequence(p.code) && creates) {
    // A sequence object's Name is the Empty Buffer (the TPM gives it no
    // nameAlg; libtpms and the reference code, EntityGetName): known from
    // this authenticated answer, so its SequenceUpdate and SequenceComplete
    // go out wrapped too. A response handle is not in rpHash: a swapped one
    // names another handle, whose commands the TPM then refuses (cpHash).
    names_[areas.handles[0]] = Bytes();
  } else if (p.caller_encrypts_response && (p.code == cc::kLoad || p.code == cc::kLoadExternal)) {
    // The Name in the answer is the caller's ciphertext: the Name of the
    // inPublic the TPM loaded under the wrapper's cpHash, or none (read
    // again, audited, before a command names it).
    if (creates && !p.loaded_name.empty()) {
      names_[areas.handles[0]] = p.loaded_name;
    } else if (creates) {
      names_.erase(areas.handles[0]);
    }
  } else if (std::optional<Bytes> name = name_in_response(p.code, parameters)) {
    if (creates) {
      names_[areas.handles[0]] = std::move(*name);
    } else if (!p.handles.empty() && (p.code == cc::kReadPublic || p.code == cc::kNvReadPublic)) {
      names_[p.handles[0]] = std::move(*name);
    }
  }
}

void CommandWrapper::forget_object_names() {
  std::erase_if(names_, [](const auto& n) { return (n.first >> 24) == ht::kTransient; });
}

std::map<uint32_t, Bytes> CommandWrapper::take_object_names() {
  std::map<uint32_t, Bytes> out;
  for (auto it = names_.begin(); it != names_.end();) {
    if ((it->first >> 24) == ht::kTransient) {
      out.insert(names_.extract(it++));
    } else {
      ++it;
    }
  }
  return out;
}

void CommandWrapper::put_object_names(std::map<uint32_t, Bytes> names) {
  forget_object_names();
  names_.merge(names);
}

}  // namespace tpmsec
