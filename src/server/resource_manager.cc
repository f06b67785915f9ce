// The per-client handle spaces (tpmsec/server/handle_space.h): before a
// client's command, what it names is loaded (room made by saving what was
// used least recently, of any client) and translated; after it, the
// response's handle is given back in the client's terms. What a client
// holds stays loaded while nobody needs its slot.
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "server/handle_listing.h"
#include "server/tpm_calls.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/server/handle_space.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wire.h"

namespace tpmsec::server {
namespace {

constexpr uint32_t kCommandCodeBits = 0x2000FFFF;  // TPMA_CC commandIndex and V: the TPM_CC
constexpr uint32_t kVirtualBase = 0x80FF0000;      // a client's object handles: 0x80FF0000 + n
constexpr uint32_t kStartAuthSession = cmd::StartAuthSession::kInfo.code;
constexpr uint32_t kContextSave = cmd::ContextSave::kInfo.code;
constexpr uint32_t kContextLoad = cmd::ContextLoad::kInfo.code;
constexpr uint32_t kFlushContext = cmd::FlushContext::kInfo.code;
constexpr uint32_t kGetCapability = cmd::GetCapability::kInfo.code;
constexpr int kMaxEvictions = 8;  // rooms made for one command: bounded whatever the TPM answers

bool is_transient(uint32_t h) { return (h >> 24) == ht::kTransient; }

// Commands that may need an object slot and change nothing else: those that
// load or create an object, and Create and Import, which libtpms builds the
// new object in a slot for.
bool needs_object_room(const CommandInfo& info) {
  return info.creates_handle || info.retry_safe || info.code == cmd::Create::kInfo.code || info.code == 0x156;
}

}  // namespace

class ResourceManager::Impl {
 public:
  Impl(Transport& tpm, Log log) : tpm_(tpm), log_(std::move(log)) {}

  Status start(Transport* attributes_from);
  void open(ClientId id, ClientLimits limits, PeerIdentity peer) {
    clients_[id] = Client{id, limits, peer, {}, 0};
    note("client connected (private handles: a handle space of its own)");
  }
  Bytes execute(ClientId id, ByteView command, bool as_server);
  void close(ClientId id);
  void shutdown();
  void reserve(uint32_t h) { reserved_.insert(h); }
  void release(uint32_t h) { reserved_.erase(h); }
  size_t entries() const {
    size_t n = clients_.size() + sessions_.size() + reserved_.size();
    for (const auto& [id, c] : clients_) n += c.objects.size();
    return n;
  }

 private:
  struct Object {
    Bytes context;        // its TPMS_CONTEXT while saved
    uint32_t loaded = 0;  // its TPM handle while loaded
    uint64_t used = 0;
  };
  struct Client {
    ClientId id = 0;
    ClientLimits limits;
    PeerIdentity peer;
    std::map<uint32_t, Object> objects;  // by virtual handle
    uint32_t next = 0;                   // the next virtual handle's number
  };
  enum class State { kLoaded, kSavedByServer, kSavedByClient, kAbandoned };
  struct Session {
    ClientId owner = 0;           // 0 once abandoned
    std::optional<uint32_t> uid;  // the owner's peer (who may claim it abandoned)
    State state = State::kLoaded;
    Bytes context;      // the current TPMS_CONTEXT while saved
    Bytes client_copy;  // the one its client saved (kSavedByClient, kAbandoned)
    uint64_t saved_at = 0;
    uint64_t used = 0;
  };
  // What one command names, never evicted to make room for it.
  struct Keep {
    std::set<uint32_t> objects;   // TPM handles
    std::set<uint32_t> sessions;
  };

  void note(const std::string& line) const {
    if (log_) log_(line);
  }
  size_t sessions_of(ClientId id) const {
    return static_cast<size_t>(
        std::count_if(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s.second.owner == id; }));
  }
  bool owns_session(ClientId id, uint32_t h) const {
    auto s = sessions_.find(h);
    return s != sessions_.end() && s->second.owner == id;
  }
  Bytes transmit(ByteView frame) {
    auto r = tpm_.transmit(frame);
    return r.ok() ? std::move(*r) : error_frame(rc::kFailure);
  }

  // Slots.
  bool evict_object(const Keep& keep);
  bool evict_session(const Keep& keep);
  bool sweep_orphans(bool objects);
  uint32_t load_object(Object& o, Keep& keep);
  uint32_t load_session(uint32_t h, Session& s, Keep& keep);
  bool save_session(uint32_t h, Session& s, const Keep& keep);
  void regap(const Keep& keep);
  Bytes send_with_room(ByteView frame, const CommandInfo& info, const Keep& keep);
  void forget_stale(uint32_t loaded);
  uint32_t add_object(Client& c, uint32_t loaded);

  // A command's areas and response in the client's terms.
  std::optional<uint32_t> map_command(Client& c, const CommandAreas& areas, Bytes& frame, bool as_server, Keep& keep);
  std::optional<uint32_t> map_response(Client& c, const CommandAreas& areas, Bytes& response, bool as_server);
  void note_flushed(Client& c, const CommandAreas& areas, ByteView response);
  Bytes context_load_command(Client& c, const CommandAreas& areas, ByteView command);
  Bytes flush_command(Client& c, const CommandAreas& areas, ByteView command, bool as_server);
  void flush_session(uint32_t h);
  void abandon(uint32_t h, Session& s);

  Transport& tpm_;
  Log log_;
  std::set<uint32_t> implemented_;
  std::map<ClientId, Client> clients_;
  std::map<uint32_t, Session> sessions_;  // by TPM handle
  std::deque<uint32_t> abandoned_;        // oldest first
  std::set<uint32_t> reserved_;
  uint64_t saves_ = 0;
  uint64_t tick_ = 0;
};

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
  return ok_status();
}

// The TPM gave out `loaded` for a new object: any client's object still
// taken to be there is not (flushed behind the manager's back: a TPM Reset,
// Clear, HierarchyControl), and must never reach the new one.
void ResourceManager::Impl::forget_stale(uint32_t loaded) {
  for (auto& [id, c] : clients_) {
    std::erase_if(c.objects, [&](const auto& o) { return o.second.loaded == loaded; });
  }
}

uint32_t ResourceManager::Impl::add_object(Client& c, uint32_t loaded) {
  forget_stale(loaded);
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
    // Not there (flushed behind the manager's back): its slot is free.
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
bool ResourceManager::Impl::evict_session(const Keep& keep) {
  uint32_t victim = 0;
  uint64_t oldest = UINT64_MAX;
  for (const auto& [h, s] : sessions_) {
    if (s.state == State::kLoaded && !keep.sessions.count(h) && s.used < oldest) {
      victim = h;
      oldest = s.used;
    }
  }
  if (victim == 0) return sweep_orphans(false);
  if (!save_session(victim, sessions_.at(victim), keep)) sessions_.erase(victim);
  return true;
}

// The server owns its TPM: an object or session on it that no client and
// not the server holds was created by a command whose answer was lost or
// garbled on the way (the TPM did it; nobody learned its handle). When the
// TPM is full of them, they are flushed, so that a bad bus cannot fill the
// TPM for good. The listing is read as the hostile input it is: a handle
// outside the range asked for is ignored, one the manager knows is kept.
bool ResourceManager::Impl::sweep_orphans(bool objects) {
  std::set<uint32_t> known(reserved_.begin(), reserved_.end());  // objects: TPM handles
  std::set<uint32_t> slots;                                        // sessions: by slot (index bits)
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
      if (objects ? (!is_transient(h) || known.count(h)) : (!ht::is_session(h) || slots.count(h & 0x00FFFFFF))) continue;
      if (flush_context(tpm_, h) == rc::kSuccess) ++flushed;
    }
  }
  if (flushed) note(fmt::format("space: {} {} nobody holds flushed", flushed, objects ? "object(s)" : "session(s)"));
  return flushed > 0;
}

bool ResourceManager::Impl::save_session(uint32_t h, Session& s, const Keep& keep) {
  Saved saved = context_save(tpm_, h);
  if (rc_base(saved.rc) == rc::kContextGap) {
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
    (void)flush_context(tpm_, l.handle);
    return rc::kFailure;
  }
  forget_stale(l.handle);
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
  if (l.rc == rc::kSuccess) (void)flush_context(tpm_, l.handle);
  note(fmt::format("space: session 0x{:08x} could not be loaded back ({})", h, describe_rc(l.rc)));
  return l.rc == rc::kSuccess ? rc::kFailure : l.rc;
}

// Part 1 §30.5: the oldest saved context limits how far the TPM's context
// counter may run ahead; loading and saving it again makes it the newest.
void ResourceManager::Impl::regap(const Keep& keep) {
  std::vector<std::pair<uint64_t, uint32_t>> saved;
  for (const auto& [h, s] : sessions_) {
    if (s.state != State::kLoaded) saved.emplace_back(s.saved_at, h);
  }
  std::sort(saved.begin(), saved.end());
  size_t done = 0;
  for (const auto& [at, h] : saved) {
    Session& s = sessions_.at(h);
    Loaded l = context_load(tpm_, s.context);
    if (rc_base(l.rc) == rc::kSessionMemory && evict_session(keep)) l = context_load(tpm_, s.context);
    if (l.rc != rc::kSuccess || l.handle != h) continue;
    Saved again = context_save(tpm_, h);
    if (again.rc != rc::kSuccess) {
      if (s.state == State::kSavedByServer) s.state = State::kLoaded;
      continue;
    }
    s.context = std::move(again.context);
    s.saved_at = ++saves_;
    ++done;
  }
  note(fmt::format("space: context gap: {} saved session(s) loaded and saved again", done));
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

Bytes ResourceManager::Impl::execute(ClientId id, ByteView command, bool as_server) {
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
  if (info.code == kContextLoad) return context_load_command(c, *areas, command);
  if (info.code == kFlushContext) return flush_command(c, *areas, command, as_server);

  // Limits, before anything is loaded.
  if (!as_server && info.code == kStartAuthSession && sessions_of(id) >= c.limits.max_sessions) {
    return error_frame(rc::kSessionHandles);
  }
  if (!as_server && info.creates_handle && info.code != kStartAuthSession && c.objects.size() >= c.limits.max_objects) {
    return error_frame(rc::kObjectMemory);
  }
  if (info.extensive) {
    // It may flush objects (Part 2 §8.9, TPMA_CC.extensive): every client's
    // is saved first, so none is lost or mistaken for another.
    while (evict_object({})) {
    }
  }
  Bytes frame(command.begin(), command.end());
  Keep keep;
  if (std::optional<uint32_t> refusal = map_command(c, *areas, frame, as_server, keep)) return error_frame(*refusal);
  Bytes response = send_with_room(frame, info, keep);
  if (std::optional<uint32_t> refusal = map_response(c, *areas, response, as_server)) return error_frame(*refusal);
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
  for (uint32_t h : reserved_) keep.sessions.insert(h);
  for (size_t i = 0; i < areas.handles.size(); ++i) {
    const uint32_t h = areas.handles[i];
    if (as_server && reserved_.count(h)) continue;
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
      store_be32(frame.data() + kFrameHeaderBytes + 4 * i, o->second.loaded);
    } else if (ht::is_session(h)) {
      if (!owns_session(c.id, h)) return rc_handle_at(i);
      const uint32_t r = load_session(h, sessions_.at(h), keep);
      if (r == rc::kSessionMemory) return r;
      if (r != rc::kSuccess) {
        sessions_.erase(h);
        return rc_handle_at(i);
      }
    }
  }
  for (size_t j = 0; j < areas.sessions.size(); ++j) {
    const uint32_t h = areas.sessions[j].handle;
    if (!ht::is_session(h) || reserved_.count(h)) continue;
    if (!owns_session(c.id, h)) return rc_session_handle_at(j);
    const uint32_t r = load_session(h, sessions_.at(h), keep);
    if (r == rc::kSessionMemory) return r;
    if (r != rc::kSuccess) {
      sessions_.erase(h);
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
    if (created && as_server) {
      if (is_transient(created)) forget_stale(created);
      reserved_.insert(created);
    } else if (is_transient(created)) {
      uint32_t v = add_object(c, created);
      if (v == 0) {
        (void)flush_context(tpm_, created);
        return rc::kObjectMemory;
      }
      store_be32(response.data() + kFrameHeaderBytes, v);
    } else if (ht::is_session(created)) {
      sessions_[created] = Session{c.id, c.peer.uid, State::kLoaded, {}, {}, 0, ++tick_};
    }
  }
  if (areas.info->code == kContextSave && succeeded(response) && !areas.handles.empty()) {
    auto s = sessions_.find(areas.handles[0]);
    Bytes context(response.begin() + kFrameHeaderBytes, response.end());
    if (s != sessions_.end() && s->second.owner == c.id && saved_handle_of(context) == s->first) {
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
    if (!(e.attributes & attr::kContinueSession) && owns_session(c.id, e.handle)) sessions_.erase(e.handle);
  }
  if (!areas.info->flushes_handles) return;
  for (uint32_t h : areas.handles) {
    if (is_transient(h)) c.objects.erase(h);
  }
}

// ContextLoad: a session's context goes back to the TPM only for the client
// it is bound to (or, abandoned, a client of the same peer identity); an
// object's is the client's to load, within its limit.
Bytes ResourceManager::Impl::context_load_command(Client& c, const CommandAreas& areas, ByteView command) {
  const uint32_t saved = saved_handle_of(areas.parameters);
  if (saved == 0) return error_frame(rc_parameter(rc::kSize, 0));
  Keep keep;
  if (!ht::is_session(saved)) {
    if (c.objects.size() >= c.limits.max_objects) return error_frame(rc::kObjectMemory);
    Bytes response = send_with_room(command, *areas.info, keep);
    const uint32_t loaded = response_handle(response);
    if (is_transient(loaded)) {
      uint32_t v = add_object(c, loaded);
      if (v == 0) {
        (void)flush_context(tpm_, loaded);
        return error_frame(rc::kObjectMemory);
      }
      store_be32(response.data() + kFrameHeaderBytes, v);
    }
    return response;
  }
  auto found = sessions_.find(saved);
  if (found == sessions_.end()) {
    // Not one a client of this server saved: the TPM decides, and what it
    // loads is the client's.
    if (reserved_.count(saved)) return error_frame(rc_parameter(rc::kHandle, 0));
    if (sessions_of(c.id) >= c.limits.max_sessions) return error_frame(rc::kSessionHandles);
    Bytes response = send_with_room(command, *areas.info, keep);
    if (response_handle(response) == saved) sessions_[saved] = Session{c.id, c.peer.uid, State::kLoaded, {}, {}, 0, ++tick_};
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
  if (response_handle(response) != saved) {
    if (succeeded(response)) (void)flush_context(tpm_, response_handle(response));
    return succeeded(response) ? error_frame(rc::kFailure) : response;
  }
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
    if (succeeded(response)) reserved_.erase(h);
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
    store_be32(frame.data() + frame.size() - 4, o->second.loaded);
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
      sessions_.erase(h);
    }
  }
  return response;
}

void ResourceManager::Impl::flush_session(uint32_t h) {
  uint32_t r = flush_context(tpm_, h);
  if (r != rc::kSuccess) note(fmt::format("space: session 0x{:08x} could not be flushed ({})", h, describe_rc(r)));
}

void ResourceManager::Impl::abandon(uint32_t h, Session& s) {
  s.owner = 0;
  s.state = State::kAbandoned;
  abandoned_.push_back(h);
  while (abandoned_.size() > kMaxAbandoned) {
    const uint32_t oldest = abandoned_.front();
    abandoned_.pop_front();
    flush_session(oldest);
    sessions_.erase(oldest);
  }
}

void ResourceManager::Impl::close(ClientId id) {
  auto found = clients_.find(id);
  if (found == clients_.end()) return;
  size_t flushed = 0, kept = 0;
  const size_t objects = found->second.objects.size();
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
    sessions_.erase(s);
  }
  note(fmt::format("client closed (private handles: {} object(s) dropped, {} session(s) flushed, {} it saved kept)",
                   objects, flushed, kept));
}

void ResourceManager::Impl::shutdown() {
  std::vector<ClientId> ids;
  for (const auto& [id, c] : clients_) ids.push_back(id);
  for (ClientId id : ids) close(id);
  for (const auto& [h, s] : sessions_) flush_session(h);
  sessions_.clear();
  abandoned_.clear();
}

ResourceManager::ResourceManager(Transport& tpm, Log log) : impl_(std::make_unique<Impl>(tpm, std::move(log))) {}
ResourceManager::~ResourceManager() { impl_->shutdown(); }
Status ResourceManager::start(Transport* attributes_from) { return impl_->start(attributes_from); }
void ResourceManager::open(ClientId client, ClientLimits limits, PeerIdentity peer) {
  impl_->open(client, limits, peer);
}
Bytes ResourceManager::execute(ClientId client, ByteView command, bool as_server) {
  return impl_->execute(client, command, as_server);
}
void ResourceManager::close(ClientId client) { impl_->close(client); }
void ResourceManager::shutdown() { impl_->shutdown(); }
void ResourceManager::reserve(uint32_t handle) { impl_->reserve(handle); }
void ResourceManager::release(uint32_t handle) { impl_->release(handle); }
size_t ResourceManager::entries() const { return impl_->entries(); }

}  // namespace tpmsec::server
