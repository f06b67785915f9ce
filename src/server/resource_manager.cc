// The per-client handle spaces (tpmsec/server/handle_space.h): before a
// client's command, what it names is loaded and translated; after it, what
// the client holds is saved again (objects also flushed), so between
// commands the TPM holds nothing of any client's.
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

constexpr uint32_t kRHandle = 1u << 28;            // TPMA_CC rHandle (Part 2 §8.9)
constexpr uint32_t kCommandCodeBits = 0x2000FFFF;  // TPMA_CC commandIndex and V: the TPM_CC
constexpr uint32_t kVirtualBase = 0x80FF0000;      // a client's object handles: 0x80FF0000 + n
constexpr uint32_t kStartAuthSession = cmd::StartAuthSession::kInfo.code;
constexpr uint32_t kContextSave = cmd::ContextSave::kInfo.code;
constexpr uint32_t kContextLoad = cmd::ContextLoad::kInfo.code;
constexpr uint32_t kFlushContext = cmd::FlushContext::kInfo.code;
constexpr uint32_t kGetCapability = cmd::GetCapability::kInfo.code;

bool is_transient(uint32_t h) { return (h >> 24) == ht::kTransient; }

}  // namespace

class ResourceManager::Impl {
 public:
  Impl(Transport& tpm, Log log) : tpm_(tpm), log_(std::move(log)) {}

  Status start(Transport* attributes_from) {
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

  void open(ClientId id, ClientLimits limits, PeerIdentity peer) {
    clients_[id] = Client{id, limits, peer, {}, 0};
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
    Bytes context;         // its TPMS_CONTEXT while not loaded
    uint32_t loaded = 0;   // its TPM handle while loaded (during a command)
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
    ClientId owner = 0;  // 0 once abandoned
    std::optional<uint32_t> uid;  // the owner's peer identity (who may claim it abandoned)
    State state = State::kLoaded;
    Bytes context;      // the current TPMS_CONTEXT while saved
    Bytes client_copy;  // the TPMS_CONTEXT its client saved (State::kSavedByClient, kAbandoned)
    uint64_t saved_at = 0;
  };

  void note(const std::string& line) const {
    if (log_) log_(line);
  }
  Bytes refuse(Client& c, uint32_t code) {
    save_space(c);
    return error_frame(code);
  }
  size_t sessions_of(ClientId id) const {
    return static_cast<size_t>(
        std::count_if(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s.second.owner == id; }));
  }
  bool owns_session(ClientId id, uint32_t h) const {
    auto s = sessions_.find(h);
    return s != sessions_.end() && s->second.owner == id;
  }

  // Loads what the command names; false (and the TPM's answer for it in
  // `refusal`) when it cannot be.
  bool load_object(Client& c, uint32_t vhandle, Object& o, size_t index, uint32_t& refusal);
  bool load_session(uint32_t h, Session& s);
  // Saves (and flushes) what the client holds loaded.
  void save_space(Client& c);
  bool save_session(uint32_t h, Session& s);
  void regap();
  uint32_t add_object(Client& c, uint32_t loaded);

  std::optional<uint32_t> map_command(Client& c, const CommandAreas& areas, Bytes& frame, bool as_server);
  std::optional<uint32_t> map_response(Client& c, const CommandAreas& areas, Bytes& response, bool as_server);
  Bytes context_load_command(ClientId id, Client& c, const CommandAreas& areas, ByteView command);
  Bytes flush_command(ClientId id, Client& c, const CommandAreas& areas, ByteView command, bool as_server);
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
};

uint32_t ResourceManager::Impl::add_object(Client& c, uint32_t loaded) {
  for (uint32_t tries = 0; tries < 0x10000; ++tries) {
    uint32_t v = kVirtualBase | (c.next++ & 0xFFFF);
    if (!c.objects.count(v)) {
      c.objects[v] = Object{{}, loaded};
      return v;
    }
  }
  return 0;
}

bool ResourceManager::Impl::load_object(Client& c, uint32_t vhandle, Object& o, size_t index, uint32_t& refusal) {
  if (o.loaded) return true;
  Loaded l = context_load(tpm_, o.context);
  if (l.rc == rc::kSuccess && is_transient(l.handle)) {
    o.loaded = l.handle;
    return true;
  }
  if (l.rc == rc::kSuccess) (void)flush_context(tpm_, l.handle);
  note(fmt::format("space: object 0x{:08x} could not be loaded ({}): forgotten", vhandle, describe_rc(l.rc)));
  // The TPM cannot take it back (a reset since, or out of memory): the
  // client's handle names nothing any more, as after the kernel's -ENOENT.
  if (rc_base(l.rc) == rc::kObjectMemory) {
    refusal = rc::kObjectMemory;
    return false;
  }
  c.objects.erase(vhandle);
  refusal = rc_handle_at(index);
  return false;
}

bool ResourceManager::Impl::load_session(uint32_t h, Session& s) {
  if (s.state == State::kLoaded) return true;
  Loaded l = context_load(tpm_, s.context);
  if (l.rc == rc::kSuccess && l.handle == h) {
    s.state = State::kLoaded;
    return true;
  }
  if (l.rc == rc::kSuccess) (void)flush_context(tpm_, l.handle);
  note(fmt::format("space: session 0x{:08x} could not be loaded back ({})", h, describe_rc(l.rc)));
  return false;
}

bool ResourceManager::Impl::save_session(uint32_t h, Session& s) {
  Saved saved = context_save(tpm_, h);
  if (rc_base(saved.rc) == rc::kContextGap) {
    regap();
    saved = context_save(tpm_, h);
  }
  if (saved.rc != rc::kSuccess) return false;
  s.context = std::move(saved.context);
  s.saved_at = ++saves_;
  s.state = State::kSavedByServer;
  return true;
}

void ResourceManager::Impl::save_space(Client& c) {
  for (auto it = c.objects.begin(); it != c.objects.end();) {
    Object& o = it->second;
    if (!o.loaded) {
      ++it;
      continue;
    }
    Saved saved = context_save(tpm_, o.loaded);
    if (saved.rc != rc::kSuccess) {
      // The command flushed it (FlushContext, a sequence's completion): gone.
      it = c.objects.erase(it);
      continue;
    }
    (void)flush_context(tpm_, o.loaded);
    o.context = std::move(saved.context);
    o.loaded = 0;
    ++it;
  }
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Session& s = it->second;
    if (s.state != State::kLoaded || s.owner != c.id) {
      ++it;
      continue;
    }
    // Not there any more (continueSession clear, flushed, a reset): forgotten.
    it = save_session(it->first, s) ? std::next(it) : sessions_.erase(it);
  }
}

// Part 1 §30.5: the oldest saved context limits how far the TPM's context
// counter may run ahead; loading and saving it again makes it the newest.
void ResourceManager::Impl::regap() {
  std::vector<std::pair<uint64_t, uint32_t>> saved;
  for (const auto& [h, s] : sessions_) {
    if (s.state != State::kLoaded) saved.emplace_back(s.saved_at, h);
  }
  std::sort(saved.begin(), saved.end());
  size_t done = 0;
  for (const auto& [at, h] : saved) {
    Session& s = sessions_.at(h);
    const State was = s.state;
    Loaded l = context_load(tpm_, s.context);
    if (l.rc != rc::kSuccess || l.handle != h) continue;
    Saved again = context_save(tpm_, h);
    if (again.rc != rc::kSuccess) {
      s.state = State::kLoaded;  // saved after the command
      continue;
    }
    s.context = std::move(again.context);
    s.saved_at = ++saves_;
    s.state = was;
    ++done;
  }
  note(fmt::format("space: context gap: {} saved session(s) loaded and saved again", done));
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
    auto response = tpm_.transmit(command);
    return response.ok() ? std::move(*response) : error_frame(rc::kFailure);
  }
  const uint32_t code = areas->info->code;
  if (code == kGetCapability) {
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
  if (code == kContextLoad) return context_load_command(id, c, *areas, command);
  if (code == kFlushContext) return flush_command(id, c, *areas, command, as_server);

  // Limits, before anything is loaded.
  if (!as_server && code == kStartAuthSession && sessions_of(id) >= c.limits.max_sessions) {
    return error_frame(rc::kSessionHandles);
  }
  if (!as_server && areas->info->creates_handle && code != kStartAuthSession &&
      c.objects.size() >= c.limits.max_objects) {
    return error_frame(rc::kObjectMemory);
  }
  Bytes frame(command.begin(), command.end());
  if (std::optional<uint32_t> refusal = map_command(c, *areas, frame, as_server)) return refuse(c, *refusal);

  auto sent = tpm_.transmit(frame);
  Bytes response = sent.ok() ? std::move(*sent) : error_frame(rc::kFailure);
  if ((code == kStartAuthSession || code == kContextSave) && rc_base(response_code(response)) == rc::kContextGap) {
    regap();
    sent = tpm_.transmit(frame);
    response = sent.ok() ? std::move(*sent) : error_frame(rc::kFailure);
  }

  if (std::optional<uint32_t> refusal = map_response(c, *areas, response, as_server)) return refuse(c, *refusal);
  save_space(c);
  return response;
}

// The command's handle area and authorization area in the TPM's terms: the
// client's objects loaded and their virtual handles replaced, its sessions
// loaded; the TPM's answer for the first handle that is not the client's.
std::optional<uint32_t> ResourceManager::Impl::map_command(Client& c, const CommandAreas& areas, Bytes& frame,
                                                           bool as_server) {
  for (size_t i = 0; i < areas.handles.size(); ++i) {
    const uint32_t h = areas.handles[i];
    if (as_server && reserved_.count(h)) continue;
    if (is_transient(h)) {
      auto o = c.objects.find(h);
      if (o == c.objects.end()) return rc_handle_at(i);
      uint32_t refusal = 0;
      if (!load_object(c, h, o->second, i, refusal)) return refusal;
      store_be32(frame.data() + kFrameHeaderBytes + 4 * i, o->second.loaded);
    } else if (ht::is_session(h)) {
      if (!owns_session(c.id, h)) return rc_handle_at(i);
      Session& s = sessions_.at(h);
      if (s.state == State::kSavedByServer && !load_session(h, s)) {
        sessions_.erase(h);
        return rc_handle_at(i);
      }
    }
  }
  for (size_t j = 0; j < areas.sessions.size(); ++j) {
    const uint32_t h = areas.sessions[j].handle;
    if (!ht::is_session(h) || reserved_.count(h)) continue;
    if (!owns_session(c.id, h)) return rc_session_handle_at(j);
    Session& s = sessions_.at(h);
    if (s.state == State::kSavedByServer && !load_session(h, s)) {
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
  const ClientId id = c.id;
  const uint32_t code = areas.info->code;
  if (areas.info->response_handle_count == 1) {
    const uint32_t created = response_handle(response);
    if (created && as_server) {
      reserved_.insert(created);
    } else if (is_transient(created)) {
      uint32_t v = add_object(c, created);
      if (v == 0) {
        (void)flush_context(tpm_, created);
        return rc::kObjectMemory;
      }
      store_be32(response.data() + kFrameHeaderBytes, v);
    } else if (ht::is_session(created)) {
      sessions_[created] = Session{id, c.peer.uid, State::kLoaded, {}, {}, 0};
    }
  }
  if (code == kContextSave && succeeded(response) && !areas.handles.empty()) {
    auto s = sessions_.find(areas.handles[0]);
    Bytes context(response.begin() + kFrameHeaderBytes, response.end());
    if (s != sessions_.end() && s->second.owner == id && saved_handle_of(context) == s->first) {
      // Saved by its client: the TPM holds it saved; bound to this client.
      s->second.state = State::kSavedByClient;
      s->second.context = context;
      s->second.client_copy = std::move(context);
      s->second.saved_at = ++saves_;
    }
  }
  return std::nullopt;
}

// ContextLoad: a session's context goes back to the TPM only for the client
// it is bound to (or, abandoned, a client of the same peer identity); an
// object's is the client's to load, within its limit.
Bytes ResourceManager::Impl::context_load_command(ClientId id, Client& c, const CommandAreas& areas,
                                                  ByteView command) {
  const uint32_t saved = saved_handle_of(areas.parameters);
  if (saved == 0) return error_frame(rc_parameter(rc::kSize, 0));
  if (ht::is_session(saved)) {
    auto found = sessions_.find(saved);
    if (found == sessions_.end()) {
      // Not one a client of this server saved: the TPM decides, and what it
      // loads is the client's.
      if (reserved_.count(saved)) return error_frame(rc_parameter(rc::kHandle, 0));
      if (sessions_of(id) >= c.limits.max_sessions) return error_frame(rc::kSessionHandles);
      auto sent = tpm_.transmit(command);
      Bytes response = sent.ok() ? std::move(*sent) : error_frame(rc::kFailure);
      if (response_handle(response) == saved) {
        sessions_[saved] = Session{id, c.peer.uid, State::kLoaded, {}, {}, 0};
        save_space(c);
      }
      return response;
    }
    Session& s = found->second;
    const bool claimable = s.state == State::kAbandoned && s.uid == c.peer.uid;
    const bool its = s.owner == id && s.state == State::kSavedByClient;
    const ByteView given = areas.parameters;
    if ((!its && !claimable) || !std::equal(given.begin(), given.end(), s.client_copy.begin(), s.client_copy.end())) {
      return error_frame(rc_parameter(rc::kHandle, 0));
    }
    if (!its && sessions_of(id) >= c.limits.max_sessions) return error_frame(rc::kSessionHandles);
    // The current context (the client's copy unless a context gap made a
    // newer one) goes to the TPM.
    Bytes response = send_plain(tpm_, kContextLoad, s.context);
    if (response_handle(response) != saved) {
      if (succeeded(response)) (void)flush_context(tpm_, response_handle(response));
      return succeeded(response) ? error_frame(rc::kFailure) : response;
    }
    if (claimable) std::erase(abandoned_, saved);
    s.owner = id;
    s.uid = c.peer.uid;
    s.state = State::kLoaded;
    s.client_copy.clear();
    save_space(c);
    return response;
  }
  if (c.objects.size() >= c.limits.max_objects) return error_frame(rc::kObjectMemory);
  auto sent = tpm_.transmit(command);
  Bytes response = sent.ok() ? std::move(*sent) : error_frame(rc::kFailure);
  const uint32_t loaded = response_handle(response);
  if (is_transient(loaded)) {
    uint32_t v = add_object(c, loaded);
    if (v == 0) {
      (void)flush_context(tpm_, loaded);
      return error_frame(rc::kObjectMemory);
    }
    store_be32(response.data() + kFrameHeaderBytes, v);
  }
  save_space(c);
  return response;
}

// FlushContext names its handle as a parameter (Part 3 §28.4): the client's
// own, translated; anything of another client's or the server's refused.
Bytes ResourceManager::Impl::flush_command(ClientId id, Client& c, const CommandAreas& areas, ByteView command,
                                           bool as_server) {
  Reader r(areas.parameters);
  const uint32_t h = r.u32("flushHandle");
  if (!r.ok()) return error_frame(rc_parameter(rc::kSize, 0));
  Bytes frame(command.begin(), command.end());
  if (as_server && reserved_.count(h)) {
    auto sent = tpm_.transmit(frame);
    Bytes response = sent.ok() ? std::move(*sent) : error_frame(rc::kFailure);
    if (succeeded(response)) reserved_.erase(h);
    return response;
  }
  if (is_transient(h)) {
    auto o = c.objects.find(h);
    if (o == c.objects.end()) return error_frame(rc_parameter(rc::kHandle, 0));
    uint32_t refusal = 0;
    if (!load_object(c, h, o->second, 0, refusal)) return error_frame(rc_parameter(rc::kHandle, 0));
    store_be32(frame.data() + frame.size() - 4, o->second.loaded);
  } else if (ht::is_session(h)) {
    if (!owns_session(id, h)) return error_frame(rc_parameter(rc::kHandle, 0));
  } else {
    auto sent = tpm_.transmit(frame);  // not a handle FlushContext takes: the TPM says so
    return sent.ok() ? std::move(*sent) : error_frame(rc::kFailure);
  }
  auto sent = tpm_.transmit(frame);
  Bytes response = sent.ok() ? std::move(*sent) : error_frame(rc::kFailure);
  if (succeeded(response)) {
    if (is_transient(h)) {
      c.objects.erase(h);
    } else {
      sessions_.erase(h);
    }
  }
  save_space(c);
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
  size_t objects = found->second.objects.size();
  for (auto& [v, o] : found->second.objects) {
    if (o.loaded) (void)flush_context(tpm_, o.loaded);  // never between commands; defensive
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
