// The TPM's slots for the resource manager's clients (space_state.h):
// objects and sessions loaded before a command that names them, the least
// recently used swapped out when the TPM has no room, the context gap
// bridged, and what nobody holds swept from a full TPM.
#include <fmt/format.h>

#include <algorithm>

#include "resource_manager/space_state.h"
#include "resource_manager/tpm_calls.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wire.h"

namespace tpmsec::server {

Status ResourceManager::Impl::start(Transport* attributes_from) {
  Tpm tpm(attributes_from ? *attributes_from : tpm_);
  uint32_t property = 0;
  for (int page = 0; page < 8; ++page) {
    TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(cmd::GetCapability{cap::kCommands, property, 256}));
    const auto& attributes = rsp.capability_data.commands;
    for (uint32_t a : attributes) implemented_.insert(a & kCommandCodeBits);
    if (!rsp.more_data || attributes.empty()) break;
    uint32_t next = (attributes.back() & kCommandCodeBits) + 1;
    if (next <= property) break;
    property = next;
  }
  if (implemented_.empty()) return runtime_error("server: the TPM lists no command it implements");
  read_session_pool(attributes_from ? *attributes_from : tpm_);
  return ok_status();
}

// A virtual handle for `loaded`, claimed first (claim_handle); 0 when
// the client has no number left.
uint32_t ResourceManager::Impl::add_object(Client& c, uint32_t loaded) {
  for (uint32_t tries = 0; tries < 0x10000; ++tries) {
    uint32_t v = kVirtualBase | (c.next++ & 0xFFFF);
    if (!c.objects.count(v)) {
      c.objects[v] = Object{{}, loaded, ++tick_};
      return v;
    }
  }
  return 0;
}

// The least recently used loaded object of any client that the command does
// not name: saved and flushed (the TPM's transient slots are few: three in
// libtpms and most chips).
bool ResourceManager::Impl::evict_object(const Keep& keep) {
  Object* victim = nullptr;
  Client* owner = nullptr;
  for (auto& [id, c] : clients_) {
    for (auto& [v, o] : c.objects) {
      if (o.loaded && !keep.objects.count(o.loaded) && (!victim || o.used < victim->used)) {
        victim = &o;
        owner = &c;
      }
    }
  }
  if (!victim) return sweep_orphans(true);
  Saved saved = context_save(tpm_, victim->loaded);
  if (saved.rc != rc::kSuccess) {
    // Not there (flushed behind the manager's back), or the answer forged:
    // its client's no more, and its slot freed either way.
    (void)flush_context(tpm_, victim->loaded);
    std::erase_if(owner->objects, [&](const auto& o) { return &o.second == victim; });
    return true;
  }
  (void)flush_context(tpm_, victim->loaded);
  victim->context = std::move(saved.context);
  victim->loaded = 0;
  return true;
}

// The least recently used loaded session of any client that the command does
// not name: context-saved (it keeps its handle).
// The server's own sessions (the wrapper's) take their turn with the
// clients': a command naming three sessions of a client's (a
// GetSessionAuditDigest under two HMAC sessions, say) has the TPM's three
// slots, as through /dev/tpmrm0, and the wrapper's session is loaded back
// before the next command that carries it.
bool ResourceManager::Impl::evict_session(const Keep& keep) {
  std::set<uint32_t> tried;
  for (;;) {
    uint32_t victim = 0;
    uint64_t oldest = UINT64_MAX;
    bool servers = false;
    for (const auto& [h, s] : sessions_) {
      if (s.state == State::kLoaded && !keep.sessions.count(h) && s.used < oldest) {
        victim = h;
        oldest = s.used;
      }
    }
    for (const auto& [h, s] : server_sessions_) {
      if (s.context.empty() && !keep.sessions.count(h) && !tried.count(h) && s.used < oldest) {
        victim = h;
        oldest = s.used;
        servers = true;
      }
    }
    if (victim == 0) {
      return sweep_orphans(false);
    }
    if (!servers) {
      if (!save_session(victim, sessions_.at(victim), keep)) {
        // Gone, or the answer forged: its client's no more, its slot freed.
        flush_session(victim);
        end_session(victim);
      }
      return true;
    }
    Saved saved = context_save(tpm_, victim);
    if (saved.rc == rc::kSuccess) {
      ServerSession& s = server_sessions_.at(victim);
      s.context = std::move(saved.context);
      s.saved_at = ++saves_;
      return true;
    }
    // Not loaded (the wrapper saved it itself) or gone: the next candidate.
    tried.insert(victim);
  }
}

uint32_t ResourceManager::Impl::load_server_session(uint32_t h, Keep& keep) {
  ServerSession& s = server_sessions_.at(h);
  s.used = ++tick_;
  keep.sessions.insert(h);
  if (s.context.empty()) return rc::kSuccess;
  Loaded l = context_load(tpm_, s.context);
  for (int i = 0; i < kMaxEvictions && rc_base(l.rc) == rc::kSessionMemory && evict_session(keep); ++i) {
    l = context_load(tpm_, s.context);
  }
  if (l.rc == rc::kSuccess && l.handle == h) {
    s.context.clear();
    return rc::kSuccess;
  }
  if (l.rc == rc::kSuccess) release_unexpected(l.handle);
  note(fmt::format("space: the server's session 0x{:08x} could not be loaded back ({})", h, describe_rc(l.rc)));
  if (rc_base(l.rc) != rc::kSessionMemory) s.context.clear();  // gone: the TPM answers its next use
  return l.rc == rc::kSuccess ? rc::kFailure : l.rc;
}

// The server owns its TPM: an object or session on it that no client and
// not the server holds was created by a command whose answer was lost or
// garbled on the way (the TPM did it; nobody learned its handle). When the
// TPM is full of them, they are flushed, so that a bad bus cannot fill the
// TPM for good. The listing is read as the hostile input it is: a handle
// outside the range asked for is ignored, one the manager knows is kept.
bool ResourceManager::Impl::sweep_orphans(bool objects) {
  std::set<uint32_t> known(reserved_.begin(), reserved_.end());  // objects: TPM handles
  std::set<uint32_t> slots;                                      // sessions: by slot (index bits)
  for (uint32_t h : reserved_) slots.insert(h & 0x00FFFFFF);
  for (const auto& [h, s] : sessions_) slots.insert(h & 0x00FFFFFF);
  for (const auto& [id, c] : clients_) {
    for (const auto& [v, o] : c.objects) {
      if (o.loaded) known.insert(o.loaded);
    }
  }
  Tpm tpm(tpm_);
  size_t flushed = 0;
  const std::vector<uint32_t> ranges = objects ? std::vector<uint32_t>{ht::kFirstTransient}
                                               : std::vector<uint32_t>{ht::kFirstLoadedSession, ht::kFirstSavedSession};
  for (uint32_t first : ranges) {
    auto listed = tpm.list_handles(first);
    if (!listed.ok()) continue;
    for (uint32_t h : *listed) {
      if (objects ? (!is_transient(h) || known.count(h)) : (!ht::is_session(h) || slots.count(h & 0x00FFFFFF)))
        continue;
      if (flush_context(tpm_, h) == rc::kSuccess) ++flushed;
    }
  }
  if (flushed) note(fmt::format("space: {} {} nobody holds flushed", flushed, objects ? "object(s)" : "session(s)"));
  return flushed > 0;
}

bool ResourceManager::Impl::save_session(uint32_t h, Session& s, const Keep& keep) {
  Saved saved = context_save(tpm_, h);
  if (rc_base(saved.rc) == rc::kContextGap && !regapping_) {
    regap(keep);
    saved = context_save(tpm_, h);
  }
  if (saved.rc != rc::kSuccess) return false;
  s.context = std::move(saved.context);
  s.saved_at = ++saves_;
  s.state = State::kSavedByServer;
  return true;
}

uint32_t ResourceManager::Impl::load_object(Object& o, Keep& keep) {
  o.used = ++tick_;
  if (o.loaded) {
    keep.objects.insert(o.loaded);
    return rc::kSuccess;
  }
  Loaded l = context_load(tpm_, o.context);
  for (int i = 0; i < kMaxEvictions && rc_base(l.rc) == rc::kObjectMemory && evict_object(keep); ++i) {
    l = context_load(tpm_, o.context);
  }
  if (l.rc != rc::kSuccess) return l.rc;
  if (!is_transient(l.handle)) {
    release_unexpected(l.handle);
    return rc::kFailure;
  }
  if (!claim_handle(l.handle)) return rc::kFailure;
  o.loaded = l.handle;
  keep.objects.insert(l.handle);
  return rc::kSuccess;
}

uint32_t ResourceManager::Impl::load_session(uint32_t h, Session& s, Keep& keep) {
  s.used = ++tick_;
  keep.sessions.insert(h);
  if (s.state != State::kSavedByServer) return rc::kSuccess;  // loaded, or the client's to load
  Loaded l = context_load(tpm_, s.context);
  for (int i = 0; i < kMaxEvictions && rc_base(l.rc) == rc::kSessionMemory && evict_session(keep); ++i) {
    l = context_load(tpm_, s.context);
  }
  if (l.rc == rc::kSuccess && l.handle == h) {
    s.state = State::kLoaded;
    return rc::kSuccess;
  }
  if (l.rc == rc::kSuccess) release_unexpected(l.handle);
  note(fmt::format("space: session 0x{:08x} could not be loaded back ({})", h, describe_rc(l.rc)));
  return l.rc == rc::kSuccess ? rc::kFailure : l.rc;
}

// Part 1 §30.5: the oldest saved context limits how far the TPM's context
// counter may run ahead; loading and saving it again makes it the newest.
// Once per call, never within itself: a context gap answered while it runs
// (forged, or not) is not bridged again, so forged answers cannot chain it.
void ResourceManager::Impl::regap(const Keep& keep) {
  if (regapping_) return;
  regapping_ = true;
  std::vector<std::pair<uint64_t, uint32_t>> saved;
  for (const auto& [h, s] : sessions_) {
    if (s.state != State::kLoaded) saved.emplace_back(s.saved_at, h);
  }
  for (const auto& [h, s] : server_sessions_) {
    if (!s.context.empty()) saved.emplace_back(s.saved_at, h);
  }
  std::sort(saved.begin(), saved.end());
  size_t done = 0;
  for (const auto& [at, h] : saved) done += regap_one(h, keep) ? 1 : 0;
  regapping_ = false;
  note(fmt::format("space: context gap: {} saved session(s) loaded and saved again", done));
}

// One saved session (a client's or the server's) loaded and saved again.
bool ResourceManager::Impl::regap_one(uint32_t h, const Keep& keep) {
  // Looked up again after every TPM call: making room may drop a session.
  auto context_of = [&]() -> Bytes* {
    if (auto server = server_sessions_.find(h); server != server_sessions_.end()) return &server->second.context;
    auto s = sessions_.find(h);
    return s != sessions_.end() && s->second.state != State::kLoaded ? &s->second.context : nullptr;
  };
  if (!context_of() || context_of()->empty()) return false;
  Loaded l = context_load(tpm_, *context_of());
  if (rc_base(l.rc) == rc::kSessionMemory && evict_session(keep) && context_of()) l = context_load(tpm_, *context_of());
  if (l.rc != rc::kSuccess) return false;
  if (l.handle != h || !context_of()) {
    release_unexpected(l.handle);
    return false;
  }
  Saved again = context_save(tpm_, h);
  if (again.rc != rc::kSuccess) {
    // Loaded after all.
    if (auto server = server_sessions_.find(h); server != server_sessions_.end()) server->second.context.clear();
    if (auto s = sessions_.find(h); s != sessions_.end() && s->second.state == State::kSavedByServer)
      s->second.state = State::kLoaded;
    return false;
  }
  *context_of() = std::move(again.context);
  if (auto server = server_sessions_.find(h); server != server_sessions_.end()) server->second.saved_at = ++saves_;
  if (auto s = sessions_.find(h); s != sessions_.end()) s->second.saved_at = ++saves_;
  return true;
}

// Sends the command; when the TPM has no room for what it creates or
// loads, makes room (the least recently used of another command's objects
// or sessions) and sends it once more: such a refusal comes before the
// command does anything (Part 3: the slot is taken first). Response codes are
// not authenticated: only commands that change nothing in the TPM but a
// slot, or nothing at all, are sent again, so a forged warning costs swaps,
// never a command applied twice.
Bytes ResourceManager::Impl::send_with_room(ByteView frame, const CommandInfo& info, const Keep& keep) {
  Bytes response = transmit(frame);
  for (int i = 0; i < kMaxEvictions; ++i) {
    const uint32_t base = rc_base(response_code(response));
    const bool session_room = info.code == kStartAuthSession || info.code == kContextLoad;
    if (base == rc::kObjectMemory && needs_object_room(info) && evict_object(keep)) {
      response = transmit(frame);
    } else if (base == rc::kSessionMemory && session_room && evict_session(keep)) {
      response = transmit(frame);
    } else if (base == rc::kSessionHandles && session_room && make_session_room(keep, /*tpm_full=*/true)) {
      // The TPM's active sessions are all taken: who gives way is the fair
      // shares' rule (fair_share.cc), never a uid under its share.
      response = transmit(frame);
    } else if (base == rc::kContextGap && (info.code == kStartAuthSession || info.code == kContextSave)) {
      regap(keep);
      response = transmit(frame);
      break;
    } else {
      break;
    }
  }
  return response;
}

}  // namespace tpmsec::server
