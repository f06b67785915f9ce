// The per-client handle spaces (tpmsec-server/resource_manager/resource_manager.h): before a
// client's command, what it names is loaded (room made by saving what was
// used least recently, of any client) and translated; after it, the
// response's handle is given back in the client's terms. What a client
// holds stays loaded while nobody needs its slot.
#include <fmt/format.h>

#include <algorithm>

#include "resource_manager/handle_listing.h"
#include "resource_manager/space_state.h"
#include "resource_manager/tpm_calls.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_rewrite.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wire.h"

namespace tpmsec::server {

Bytes ResourceManager::Impl::execute(ClientId id, ByteView command, bool as_server) {
  tpm_.renew();  // what one command may cost the TPM (CommandBudget)
  auto found = clients_.find(id);
  if (found == clients_.end()) return error_frame(rc::kFailure);
  Client& c = found->second;
  auto areas = read_command_areas(command, c.limits.max_frame_bytes);
  if (!areas.ok()) {
    if (areas.error().kind() != ErrorKind::kUnsupported) return error_frame(rc::kCommandSize);
    // A code the command table does not know: its handle area cannot be
    // told, so it goes to the TPM only when the TPM does not implement it
    // either (and refuses it before reading a handle).
    HeaderRead h = read_frame_header(command, c.limits.max_frame_bytes);
    if (h.check != FrameCheck::kOk || implemented_.count(h.header.code)) return error_frame(rc::kCommandCode);
    return transmit(command);
  }
  const CommandInfo& info = *areas->info;
  if (info.code == kGetCapability) {
    std::optional<Bytes> listed = list_handles_of_space(areas->parameters, !areas->sessions.empty(), [&] {
      SpaceListing l;
      for (const auto& [v, o] : c.objects) l.objects.push_back(v);
      for (const auto& [h, s] : sessions_) {
        if (s.owner != id) continue;
        (s.state == State::kSavedByClient ? l.saved_sessions : l.loaded_sessions).push_back(h);
      }
      return l;
    });
    if (listed) return std::move(*listed);
  }
  if (info.code == kContextLoad) return context_load_command(c, *areas, command, as_server);
  if (info.code == kFlushContext) return flush_command(c, *areas, command, as_server);

  // Limits, before anything is loaded.
  if (!as_server && info.code == kStartAuthSession) {
    if (std::optional<uint32_t> refusal = admit_session(c)) return error_frame(*refusal);
  }
  if (!as_server && info.creates_handle && info.code != kStartAuthSession) {
    if (std::optional<uint32_t> refusal = admit_object(c)) return error_frame(*refusal);
  }
  if (info.extensive) {
    // It may flush objects (Part 2 §8.9, TPMA_CC.extensive): every client's
    // is saved first, so none is lost or mistaken for another.
    while (evict_object({})) {
    }
  }
  Bytes frame(command.begin(), command.end());
  Keep keep{{}, {}, c.peer.uid, as_server};
  if (std::optional<uint32_t> refusal = map_command(c, *areas, frame, as_server, keep)) return error_frame(*refusal);
  Bytes response = send_with_room(frame, info, keep);
  if (std::optional<uint32_t> refusal = map_response(c, *areas, response, as_server)) {
    lost_ = true;  // the TPM ran the command; its answer does not reach the client
    orphans_possible_ = true;
    return error_frame(*refusal);
  }
  note_flushed(c, *areas, response);
  return response;
}

// The command's handle area and authorization area in the TPM's terms: the
// client's objects and sessions loaded, its virtual handles replaced; the
// TPM's answer for the first handle that is not the client's.
std::optional<uint32_t> ResourceManager::Impl::map_command(Client& c, const CommandAreas& areas, Bytes& frame,
                                                           bool as_server, Keep& keep) {
  // Whatever the command names and is loaded already stays for it.
  for (uint32_t h : areas.handles) {
    auto o = c.objects.find(h);
    if (o != c.objects.end() && o->second.loaded) keep.objects.insert(o->second.loaded);
    if (ht::is_session(h)) keep.sessions.insert(h);
  }
  for (const AuthEntry& e : areas.sessions) keep.sessions.insert(e.handle);
  for (size_t i = 0; i < areas.handles.size(); ++i) {
    const uint32_t h = areas.handles[i];
    if (as_server && reserved_.count(h)) {
      // The server's own session, swapped out for another command: back.
      if (server_sessions_.count(h)) {
        const uint32_t r = load_server_session(h, keep);
        if (r != rc::kSuccess) return r == rc::kSessionMemory ? r : rc_handle_at(i);
      }
      continue;
    }
    if (is_transient(h)) {
      auto o = c.objects.find(h);
      if (o == c.objects.end()) return rc_handle_at(i);
      const uint32_t r = load_object(o->second, keep);
      if (r == rc::kObjectMemory) return r;
      if (r != rc::kSuccess) {
        note(fmt::format("space: object 0x{:08x} could not be loaded ({}): forgotten", h, describe_rc(r)));
        c.objects.erase(o);
        return rc_handle_at(i);
      }
      if (!rewrite_handle(frame, i, o->second.loaded).ok()) return rc_handle_at(i);
    } else if (ht::is_session(h)) {
      if (!owns_session(c.id, h)) return rc_handle_at(i);
      const uint32_t r = load_session(h, sessions_.at(h), keep);
      if (r == rc::kSessionMemory) return r;
      if (r != rc::kSuccess) {
        end_session(h);
        return rc_handle_at(i);
      }
    }
  }
  for (size_t j = 0; j < areas.sessions.size(); ++j) {
    const uint32_t h = areas.sessions[j].handle;
    if (server_sessions_.count(h)) {
      // The wrapper's session on a client's command (the client's front
      // refuses a client's own use of it).
      const uint32_t r = load_server_session(h, keep);
      if (r == rc::kSessionMemory) return r;
      if (r != rc::kSuccess) return rc_session_handle_at(j);
      continue;
    }
    if (!ht::is_session(h) || reserved_.count(h)) continue;
    if (!owns_session(c.id, h)) return rc_session_handle_at(j);
    const uint32_t r = load_session(h, sessions_.at(h), keep);
    if (r == rc::kSessionMemory) return r;
    if (r != rc::kSuccess) {
      end_session(h);
      return rc_session_handle_at(j);
    }
  }
  return std::nullopt;
}

// What the response names, in the client's terms: a new object under a
// virtual handle, a new session the client's (or, as_server, the
// server's); a session the client saved itself bound to it.
std::optional<uint32_t> ResourceManager::Impl::map_response(Client& c, const CommandAreas& areas, Bytes& response,
                                                            bool as_server) {
  if (areas.info->response_handle_count == 1) {
    const uint32_t created = response_handle(response);
    if (created && !claim_handle(created, as_server)) return rc::kFailure;
    if (created && as_server) {
      reserved_.insert(created);
      if (ht::is_session(created)) server_sessions_[created] = ServerSession{{}, 0, ++tick_};
    } else if (is_transient(created)) {
      uint32_t v = add_object(c, created);
      if (v == 0) {
        (void)flush_context(tpm_, created);
        return rc::kObjectMemory;
      }
      if (!rewrite_handle(response, 0, v).ok()) return rc::kFailure;
    } else if (ht::is_session(created)) {
      sessions_[created] = Session{c.id, c.peer.uid, State::kLoaded, {}, {}, 0, ++tick_};
    }
  }
  if (areas.info->code == kContextSave && succeeded(response) && !areas.handles.empty()) {
    auto s = sessions_.find(areas.handles[0]);
    auto saved = read_response_areas(response, 0, response.size());
    Bytes context;
    if (saved.ok() && saved->sessions.empty()) context.assign(saved->parameters.begin(), saved->parameters.end());
    if (s != sessions_.end() && s->second.owner == c.id && whole_context_saved_handle(context) == s->first) {
      // Saved by its client: the TPM holds it saved; bound to this client.
      s->second.state = State::kSavedByClient;
      s->second.context = context;
      s->second.client_copy = std::move(context);
      s->second.saved_at = ++saves_;
    }
  }
  return std::nullopt;
}

// What a successful command flushed itself: sessions used without
// continueSession, the objects of a command that flushes its handles
// (TPMA_CC.flushed: a sequence's completion).
void ResourceManager::Impl::note_flushed(Client& c, const CommandAreas& areas, ByteView response) {
  if (!succeeded(response)) return;
  for (const AuthEntry& e : areas.sessions) {
    if (!(e.attributes & attr::kContinueSession) && owns_session(c.id, e.handle)) end_session(e.handle);
  }
  if (!areas.info->flushes_handles) return;
  for (uint32_t h : areas.handles) {
    if (is_transient(h)) c.objects.erase(h);
  }
}

void ResourceManager::Impl::close(ClientId id) {
  tpm_.renew();
  auto found = clients_.find(id);
  if (found == clients_.end()) return;
  size_t flushed = 0, kept = 0;
  const size_t objects = found->second.objects.size();
  const std::string who = std::move(found->second.who);
  for (auto& [v, o] : found->second.objects) {
    if (o.loaded) (void)flush_context(tpm_, o.loaded);
  }
  clients_.erase(found);
  std::vector<uint32_t> its;
  for (const auto& [h, s] : sessions_) {
    if (s.owner == id) its.push_back(h);
  }
  for (uint32_t h : its) {
    auto s = sessions_.find(h);
    if (s == sessions_.end()) continue;  // flushed as the oldest abandoned one
    if (s->second.state == State::kSavedByClient) {
      abandon(h, s->second);
      ++kept;
      continue;
    }
    flush_session(h);
    ++flushed;
    end_session(h);
  }
  note(fmt::format(
      "{}client closed (private handles: {} object(s) dropped, {} session(s) flushed, {} it saved kept): {}", kLogDebug,
      objects, flushed, kept, who));
}

void ResourceManager::Impl::shutdown() {
  tpm_.renew();
  std::vector<ClientId> ids;
  for (const auto& [id, c] : clients_) ids.push_back(id);
  for (ClientId id : ids) close(id);
  for (const auto& [h, s] : sessions_) flush_session(h);
  sessions_.clear();
  abandoned_.clear();
  // What an answer lost or forged on the bus left behind (a handle rewritten
  // in a ContextLoad's answer: the object loaded elsewhere): nobody's now.
  if (!orphans_possible_) return;
  (void)sweep_orphans(true);
  (void)sweep_orphans(false);
}

ResourceManager::ResourceManager(Transport& tpm, Log log) : impl_(std::make_unique<Impl>(tpm, std::move(log))) {}
ResourceManager::~ResourceManager() {
  impl_->enter();  // a reset seen while it flushes forgets nothing under its loops
  impl_->shutdown();
}
Status ResourceManager::start(Transport* attributes_from) { return impl_->start(attributes_from); }
void ResourceManager::set_uid_limits(UidLimits limits) { impl_->set_uid_limits(limits); }
size_t ResourceManager::session_pool() const { return impl_->session_pool(); }
void ResourceManager::open(ClientId client, ClientLimits limits, PeerIdentity peer) {
  impl_->open(client, limits, peer);
}
Bytes ResourceManager::execute(ClientId client, ByteView command, bool as_server) {
  impl_->clear_lost();
  impl_->enter();
  Bytes response = impl_->execute(client, command, as_server);
  impl_->leave();
  return response;
}
std::optional<uint32_t> ResourceManager::refusal(ClientId client, ByteView command) const {
  return impl_->refusal(client, command);
}
void ResourceManager::close(ClientId client) {
  impl_->enter();
  impl_->close(client);
  impl_->leave();
}
void ResourceManager::shutdown() {
  impl_->enter();
  impl_->shutdown();
  impl_->leave();
}
void ResourceManager::tpm_was_reset() { impl_->tpm_was_reset(); }
void ResourceManager::reserve(uint32_t handle) { impl_->reserve(handle); }
void ResourceManager::release(uint32_t handle) { impl_->release(handle); }
void ResourceManager::report_ended_sessions(bool on) { impl_->report_ended_sessions(on); }
std::vector<uint32_t> ResourceManager::take_ended_sessions() { return impl_->take_ended_sessions(); }
bool ResourceManager::answer_lost() const { return impl_->lost(); }
size_t ResourceManager::entries() const { return impl_->entries(); }

}  // namespace tpmsec::server
