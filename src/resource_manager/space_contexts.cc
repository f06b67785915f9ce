// A client's ContextLoad and FlushContext (space_state.h): the context or
// handle they carry is the client's own, or refused; a session a client
// saved is bound to it, and to its peer once it closed.
#include <fmt/format.h>

#include <algorithm>

#include "resource_manager/space_state.h"
#include "resource_manager/tpm_calls.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_rewrite.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wire.h"

namespace tpmsec::server {

// ContextLoad: a session's context goes back to the TPM only for the client
// it is bound to (or, abandoned, a client of the same peer identity); an
// object's is the client's to load, within its limit.
Bytes ResourceManager::Impl::context_load_command(Client& c, const CommandAreas& areas, ByteView command,
                                                  bool as_server) {
  const uint32_t saved = whole_context_saved_handle(areas.parameters);
  if (saved == 0) return error_frame(rc_parameter(rc::kSize, 0));
  Keep keep{{}, {}, c.peer.uid, as_server};
  if (as_server && server_sessions_.count(saved)) {
    // The server's own session, saved by the server itself (the wrapper's
    // session room): loaded, it is the manager's to swap again.
    keep.sessions.insert(saved);
    Bytes response = send_with_room(command, *areas.info, keep);
    if (succeeded(response) && response_handle(response) != saved) return refuse_loaded(response);
    if (response_handle(response) == saved) server_sessions_[saved] = ServerSession{{}, 0, ++tick_};
    return response;
  }
  if (!ht::is_session(saved)) {
    if (std::optional<uint32_t> refusal = admit_object(c)) return error_frame(*refusal);
    Bytes response = send_with_room(command, *areas.info, keep);
    const uint32_t loaded = response_handle(response);
    if (succeeded(response) && !is_transient(loaded)) return refuse_loaded(response);
    if (is_transient(loaded)) {
      if (!claim_handle(loaded)) return error_frame(rc::kFailure);
      uint32_t v = add_object(c, loaded);
      if (v == 0) {
        (void)flush_context(tpm_, loaded);
        return error_frame(rc::kObjectMemory);
      }
      if (!rewrite_handle(response, 0, v).ok()) return error_frame(rc::kFailure);
    }
    return response;
  }
  auto found = sessions_.find(saved);
  if (found == sessions_.end()) {
    // Not one a client of this server saved: the TPM decides, and what it
    // loads is the client's.
    if (reserved_.count(saved)) return error_frame(rc_parameter(rc::kHandle, 0));
    if (std::optional<uint32_t> refusal = admit_session(c)) return error_frame(*refusal);
    Bytes response = send_with_room(command, *areas.info, keep);
    if (succeeded(response) && response_handle(response) != saved) return refuse_loaded(response);
    if (response_handle(response) == saved)
      sessions_[saved] = Session{c.id, c.peer.uid, State::kLoaded, {}, {}, 0, ++tick_};
    return response;
  }
  Session& s = found->second;
  const bool claimable = s.state == State::kAbandoned && s.uid == c.peer.uid;
  const bool its = s.owner == c.id && s.state == State::kSavedByClient;
  const ByteView given = areas.parameters;
  if ((!its && !claimable) || !std::equal(given.begin(), given.end(), s.client_copy.begin(), s.client_copy.end())) {
    return error_frame(rc_parameter(rc::kHandle, 0));
  }
  if (!its && sessions_of(c.id) >= c.limits.max_sessions) return error_frame(rc::kSessionHandles);
  // The current context (the client's copy unless a context gap made a
  // newer one) goes to the TPM.
  keep.sessions.insert(saved);
  Bytes response = send_plain(tpm_, kContextLoad, s.context);
  for (int i = 0; i < kMaxEvictions && rc_base(response_code(response)) == rc::kSessionMemory && evict_session(keep);
       ++i) {
    response = send_plain(tpm_, kContextLoad, s.context);
  }
  if (response_handle(response) != saved) return succeeded(response) ? refuse_loaded(response) : response;
  if (claimable) std::erase(abandoned_, saved);
  s.owner = c.id;
  s.uid = c.peer.uid;
  s.state = State::kLoaded;
  s.used = ++tick_;
  s.client_copy.clear();
  return response;
}

// FlushContext names its handle as a parameter (Part 3 §28.4): the client's
// own, translated; anything of another client's or the server's refused.
Bytes ResourceManager::Impl::flush_command(Client& c, const CommandAreas& areas, ByteView command, bool as_server) {
  Reader r(areas.parameters);
  const uint32_t h = r.u32("flushHandle");
  if (!r.ok()) return error_frame(rc_parameter(rc::kSize, 0));
  Bytes frame(command.begin(), command.end());
  if (as_server && reserved_.count(h)) {
    Bytes response = transmit(frame);
    if (succeeded(response)) {
      reserved_.erase(h);
      server_sessions_.erase(h);
    }
    return response;
  }
  if (is_transient(h)) {
    auto o = c.objects.find(h);
    if (o == c.objects.end()) return error_frame(rc_parameter(rc::kHandle, 0));
    if (!o->second.loaded) {
      // Saved: its blob is all there is of it (the TPM holds nothing).
      c.objects.erase(o);
      return error_frame(rc::kSuccess);  // FlushContext's answer: a bare success header
    }
    if (!rewrite_flush_handle(frame, o->second.loaded).ok()) return error_frame(rc_parameter(rc::kSize, 0));
  } else if (ht::is_session(h)) {
    if (!owns_session(c.id, h)) return error_frame(rc_parameter(rc::kHandle, 0));
  } else {
    return transmit(frame);  // not a handle FlushContext takes: the TPM says so
  }
  Bytes response = transmit(frame);
  if (succeeded(response)) {
    if (is_transient(h)) {
      c.objects.erase(h);
    } else {
      end_session(h);
    }
  }
  return response;
}

void ResourceManager::Impl::flush_session(uint32_t h) {
  uint32_t r = flush_context(tpm_, h);
  if (r != rc::kSuccess) note(fmt::format("space: session 0x{:08x} could not be flushed ({})", h, describe_rc(r)));
}

// Kept for a later client of its uid; beyond the uid's max_abandoned, that
// uid's oldest gives way (never another uid's).
void ResourceManager::Impl::abandon(uint32_t h, Session& s) {
  s.owner = 0;
  s.state = State::kAbandoned;
  abandoned_.push_back(h);
  const Uid uid = s.uid;
  size_t of_uid = static_cast<size_t>(std::count_if(abandoned_.begin(), abandoned_.end(), [&](uint32_t a) {
    auto found = sessions_.find(a);
    return found != sessions_.end() && found->second.uid == uid;
  }));
  while (of_uid-- > uid_limits_.max_abandoned) flush_oldest_abandoned(uid, "its uid's max abandoned");
}

}  // namespace tpmsec::server
