// The resource manager's state (tpmsec-server/resource_manager/resource_manager.h), shared by
// its files: resource_manager.cc (a client's command in and out),
// space_slots.cc (loading, swapping out, the context gap, orphans) and
// space_contexts.cc (ContextLoad and FlushContext of a client's own) and
// fair_share.cc (per uid limits, the session handles' shares).
#ifndef TPMSEC_SRC_RESOURCE_MANAGER_SPACE_STATE_H_
#define TPMSEC_SRC_RESOURCE_MANAGER_SPACE_STATE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "resource_manager/tpm_calls.h"
#include "tpmsec-server/resource_manager/log_priority.h"
#include "tpmsec-server/resource_manager/resource_manager.h"
#include "tpmsec/command.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/commands.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"

namespace tpmsec::server {

inline constexpr uint32_t kCommandCodeBits = 0x2000FFFF;  // TPMA_CC commandIndex and V: the TPM_CC
inline constexpr uint32_t kVirtualBase = 0x80FF0000;      // a client's object handles: 0x80FF0000 + n
inline constexpr uint32_t kStartAuthSession = cmd::StartAuthSession::kInfo.code;
inline constexpr uint32_t kContextSave = cmd::ContextSave::kInfo.code;
inline constexpr uint32_t kContextLoad = cmd::ContextLoad::kInfo.code;
inline constexpr uint32_t kFlushContext = cmd::FlushContext::kInfo.code;
inline constexpr uint32_t kGetCapability = cmd::GetCapability::kInfo.code;
inline constexpr int kMaxEvictions = 8;  // rooms made for one command: bounded whatever the TPM answers

inline bool is_transient(uint32_t h) { return (h >> 24) == ht::kTransient; }

// Commands that may need an object slot and change nothing else: those that
// load or create an object, and Create and Import, which libtpms builds the
// new object in a slot for.
inline bool needs_object_room(const CommandInfo& info) {
  return info.creates_handle || info.retry_safe || info.code == cmd::Create::kInfo.code ||
         info.code == command_info<0x156>().code;  // Import
}

class ResourceManager::Impl {
 public:
  Impl(Transport& tpm, Log log) : tpm_(tpm), log_(std::move(log)) {}

  Status start(Transport* attributes_from);
  // A command of the last execute() went out and no answer came back.
  bool lost() const { return lost_; }
  void clear_lost() { lost_ = false; }
  void open(ClientId id, ClientLimits limits, PeerIdentity peer) {
    clients_[id] = Client{id, limits, peer, {}, 0, describe_peer(id, peer)};
    note(fmt::format("{}client connected (private handles: a handle space of its own): {}", kLogDebug,
                     clients_[id].who));
  }
  Bytes execute(ClientId id, ByteView command, bool as_server);
  std::optional<uint32_t> refusal(ClientId id, ByteView command) const;
  void close(ClientId id);
  void shutdown();
  // tpm_was_reset() (space_reset.cc): marked at once, carried out between
  // the manager's calls (enter() and leave() around each public one).
  void tpm_was_reset() {
    reset_pending_ = true;
    if (!in_call_) forget_reset();
  }
  void enter() { in_call_ = true; }
  void leave() {
    in_call_ = false;
    if (reset_pending_) forget_reset();
  }
  void set_uid_limits(UidLimits limits) { uid_limits_ = limits; }
  size_t session_pool() const { return pool_; }
  void reserve(uint32_t h) { reserved_.insert(h); }
  void release(uint32_t h) { reserved_.erase(h); }
  void report_ended_sessions(bool on) {
    report_ended_ = on;
    ended_.clear();
  }
  std::vector<uint32_t> take_ended_sessions() { return std::exchange(ended_, {}); }
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
    std::string who;                     // describe_peer(), read at open
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
  // A session of the server's own (reserved_: the wrapper's): swapped out
  // like a client's when a command that does not name it needs the slot,
  // loaded back under its handle before a command that names it.
  struct ServerSession {
    Bytes context;  // while saved by the manager
    uint64_t saved_at = 0;
    uint64_t used = 0;
  };
  // What one command names, never evicted to make room for it.
  struct Keep {
    std::set<uint32_t> objects;  // TPM handles
    std::set<uint32_t> sessions;
    std::optional<uint32_t> uid;  // whose command (the session handles' shares)
    bool as_server = false;
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
  // Every session the manager stops tracking goes through here.
  void end_session(uint32_t h) {
    if (sessions_.erase(h) && report_ended_) ended_.push_back(h);
  }
  Bytes transmit(ByteView frame) {
    auto r = tpm_.transmit(frame);
    if (r.ok()) return std::move(*r);
    lost_ = true;
    orphans_possible_ = true;
    return error_frame(rc::kFailure);
  }
  bool lost_ = false;  // lost()
  // An answer was lost, refused or named a handle it should not have: the
  // TPM may hold what nobody does, swept at shutdown (only then: a server
  // that saw nothing of the kind sends nothing more when it ends).
  bool orphans_possible_ = false;

  // Slots.
  bool evict_object(const Keep& keep);
  bool evict_session(const Keep& keep);
  bool sweep_orphans(bool objects);
  uint32_t load_object(Object& o, Keep& keep);
  uint32_t load_session(uint32_t h, Session& s, Keep& keep);
  uint32_t load_server_session(uint32_t h, Keep& keep);
  bool save_session(uint32_t h, Session& s, const Keep& keep);
  void regap(const Keep& keep);
  bool regap_one(uint32_t h, const Keep& keep);
  Bytes send_with_room(ByteView frame, const CommandInfo& info, const Keep& keep);
  uint32_t add_object(Client& c, uint32_t loaded);

  // Admission (space_admission.cc).
  std::optional<uint32_t> refusal_of(const Client& c, const CommandAreas& areas) const;
  bool holds(const Client& c, uint32_t h) const;
  // Handles in answers, which nothing authenticates (space_answers.cc).
  bool held(uint32_t h) const;
  void release_unexpected(uint32_t h);
  bool claim_handle(uint32_t h, bool for_server = false);
  Bytes refuse_loaded(ByteView response);

  // A command's areas and response in the client's terms.
  std::optional<uint32_t> map_command(Client& c, const CommandAreas& areas, Bytes& frame, bool as_server, Keep& keep);
  std::optional<uint32_t> map_response(Client& c, const CommandAreas& areas, Bytes& response, bool as_server);
  void note_flushed(Client& c, const CommandAreas& areas, ByteView response);
  Bytes context_load_command(Client& c, const CommandAreas& areas, ByteView command, bool as_server);
  Bytes flush_command(Client& c, const CommandAreas& areas, ByteView command, bool as_server);
  void flush_session(uint32_t h);
  void abandon(uint32_t h, Session& s);

  // Per uid (fair_share.cc).
  using Uid = std::optional<uint32_t>;
  void read_session_pool(Transport& from);
  size_t sessions_of_uid(const Uid& uid) const;
  size_t objects_of_uid(const Uid& uid) const;
  size_t fair_share(const Uid& uid) const;
  std::optional<uint32_t> admit_session(const Client& c);
  std::optional<uint32_t> admit_object(const Client& c) const;
  bool make_session_room(const Keep& keep, bool tpm_full = false);
  bool flush_oldest_abandoned(const Uid& uid, const char* why);
  bool take_from_largest(const Uid& uid);
  void drop_session(uint32_t h, const std::string& why);

  CommandBudget tpm_;  // the TPM, a bounded number of commands per client command
  Log log_;
  std::set<uint32_t> implemented_;
  UidLimits uid_limits_;
  size_t pool_ = 64;  // the TPM's session handles (TPM_PT_ACTIVE_SESSIONS_MAX)
  std::map<ClientId, Client> clients_;
  std::map<uint32_t, Session> sessions_;  // by TPM handle
  std::deque<uint32_t> abandoned_;        // oldest first
  std::set<uint32_t> reserved_;
  std::map<uint32_t, ServerSession> server_sessions_;  // the sessions among reserved_
  uint64_t saves_ = 0;
  uint64_t tick_ = 0;
  bool report_ended_ = false;
  std::vector<uint32_t> ended_;  // since take_ended_sessions(), while report_ended_
  bool regapping_ = false;       // regap() runs: a context gap inside it is not bridged again
  // A TPM reset: what it destroyed is forgotten once no call is under way.
  void forget_reset();
  bool reset_pending_ = false;
  bool in_call_ = false;
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SRC_RESOURCE_MANAGER_SPACE_STATE_H_
