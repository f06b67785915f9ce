// Fair shares (tpmsec-server/resource_manager/handle_space.h, space_state.h): what one peer
// uid may hold, all its clients together, and who gives way when the TPM's
// session handles run out, so that no uid can deny another a session.
//
// The rule, with P the TPM's session handles (TPM_PT_ACTIVE_SESSIONS_MAX)
// and R = P / 16 of them kept for root and the server's own sessions (4 of
// libtpms's 64):
//   - a uid holds at most UidLimits::max_sessions (live, saved or abandoned);
//   - while fewer than P - R are held (every client's and the server's), a
//     uid other than root gets one; root while fewer than P;
//   - the handles all taken, a uid's share is (P - R) / the uids holding
//     sessions (the asking one counted), at least one. A uid under its share
//     gets a handle from the uid holding most above its share: that uid's
//     least recently used session is flushed, abandoned ones first, then
//     those its clients saved, then live ones. A uid at or over its share
//     (or when nobody is over theirs) gets one only by its own oldest
//     abandoned session giving way; else TPM_RC_SESSION_HANDLES. Root is
//     always under its share.
// The same rule decides when the TPM itself answers TPM_RC_SESSION_HANDLES
// (its count and the manager's may differ: sessions nobody holds, a forged
// property, a chip whose property says more than it has): P is then taken
// to be what is held, if fewer.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "resource_manager/space_state.h"
#include "resource_manager/tpm_calls.h"
#include "tpmsec/tpm.h"

namespace tpmsec::server {
namespace {

constexpr size_t kDefaultPool = 64;  // libtpms's TPM_PT_ACTIVE_SESSIONS_MAX
constexpr size_t kMaxPool = 1024;    // an answer beyond is not believed
constexpr size_t kShareFloor = 1;

std::string uid_text(const std::optional<uint32_t>& uid) { return uid ? fmt::format("uid {}", *uid) : "no uid"; }

}  // namespace

// Unauthenticated (the bus may forge it): bounded; a value too large costs
// only the TPM's own TPM_RC_SESSION_HANDLES, handled by the same rule.
void ResourceManager::Impl::read_session_pool(Transport& from) {
  Tpm tpm(from);
  auto rsp = tpm.run(cmd::GetCapability{cap::kTpmProperties, pt::kActiveSessionsMax, 1});
  pool_ = kDefaultPool;
  if (!rsp.ok() || rsp->capability_data.capability != cap::kTpmProperties) return;
  for (const auto& p : rsp->capability_data.properties) {
    if (p.property == pt::kActiveSessionsMax && p.value >= 1 && p.value <= kMaxPool) pool_ = p.value;
  }
}

size_t ResourceManager::Impl::sessions_of_uid(const Uid& uid) const {
  return static_cast<size_t>(
      std::count_if(sessions_.begin(), sessions_.end(), [&](const auto& s) { return s.second.uid == uid; }));
}

size_t ResourceManager::Impl::objects_of_uid(const Uid& uid) const {
  size_t n = 0;
  for (const auto& [id, c] : clients_) {
    if (c.peer.uid == uid) n += c.objects.size();
  }
  return n;
}

size_t ResourceManager::Impl::fair_share(const Uid& uid) const {
  std::set<Uid> holding{uid};
  for (const auto& [h, s] : sessions_) holding.insert(s.uid);
  const size_t usable = pool_ - pool_ / 16;
  return std::max(kShareFloor, usable / holding.size());
}

// A client's new session (StartAuthSession, or the ContextLoad of one the
// manager does not hold): nullopt when it may go to the TPM.
std::optional<uint32_t> ResourceManager::Impl::admit_session(const Client& c) {
  const Uid& uid = c.peer.uid;
  if (sessions_of(c.id) >= c.limits.max_sessions) return rc::kSessionHandles;
  if (sessions_of_uid(uid) >= uid_limits_.max_sessions && !flush_oldest_abandoned(uid, "its uid's limit")) {
    return rc::kSessionHandles;
  }
  const size_t held = sessions_.size() + server_sessions_.size();
  const size_t room = uid == 0u ? pool_ : pool_ - pool_ / 16;
  if (held < room) return std::nullopt;
  Keep keep;
  keep.uid = uid;
  if (make_session_room(keep)) return std::nullopt;
  return rc::kSessionHandles;
}

// A client's new object (a created or loaded one): nullopt when it may.
std::optional<uint32_t> ResourceManager::Impl::admit_object(const Client& c) const {
  if (c.objects.size() >= c.limits.max_objects || objects_of_uid(c.peer.uid) >= uid_limits_.max_objects) {
    return rc::kObjectMemory;
  }
  return std::nullopt;
}

// The session handles are all taken (`tpm_full`: the TPM said so) and
// keep.uid (or the server) needs one.
bool ResourceManager::Impl::make_session_room(const Keep& keep, bool tpm_full) {
  const size_t held = sessions_.size() + server_sessions_.size();
  if (tpm_full && held >= 1 && held < pool_) {
    note(fmt::format("space: the TPM has no session handle left with {} held: its pool is taken to be {}, not {}", held,
                     held, pool_));
    pool_ = held;
  }
  if (keep.as_server) return take_from_largest(0u) || sweep_orphans(false);  // as root
  const bool under = keep.uid == 0u || sessions_of_uid(keep.uid) < fair_share(keep.uid);
  if (under && take_from_largest(keep.uid)) return true;
  return flush_oldest_abandoned(keep.uid, "no session handle left") || sweep_orphans(false);
}

bool ResourceManager::Impl::flush_oldest_abandoned(const Uid& uid, const char* why) {
  auto oldest = std::find_if(abandoned_.begin(), abandoned_.end(), [&](uint32_t h) {
    auto s = sessions_.find(h);
    return s != sessions_.end() && s->second.uid == uid;
  });
  if (oldest == abandoned_.end()) return false;
  drop_session(*oldest, fmt::format("the oldest session {} abandoned, flushed: {}", uid_text(uid), why));
  return true;
}

// The least recently used session of the uid holding most above its share
// (never `uid`'s, never root's): abandoned first, then saved by its
// client, then any.
bool ResourceManager::Impl::take_from_largest(const Uid& uid) {
  std::map<Uid, size_t> held;
  for (const auto& [h, s] : sessions_) ++held[s.uid];
  const size_t share = fair_share(uid);  // the asking uid counted among those sharing
  const Uid* largest = nullptr;
  for (const auto& [u, n] : held) {
    if (u == uid || u == 0u || n <= share) continue;
    if (!largest || n > held[*largest]) largest = &u;
  }
  if (!largest) return false;
  const Uid victim_uid = *largest;
  uint32_t victim = 0;
  std::pair<int, uint64_t> best{3, UINT64_MAX};
  for (const auto& [h, s] : sessions_) {
    if (s.uid != victim_uid) continue;
    const int rank = s.state == State::kAbandoned ? 0 : s.state == State::kSavedByClient ? 1 : 2;
    const std::pair<int, uint64_t> key{rank, s.used};
    if (key < best) {
      best = key;
      victim = h;
    }
  }
  if (victim == 0) return false;
  drop_session(victim, fmt::format("{} holds {} sessions, over its share of {}: its least recently used flushed for {}",
                                   uid_text(victim_uid), held[victim_uid], share, uid_text(uid)));
  return true;
}

void ResourceManager::Impl::drop_session(uint32_t h, const std::string& why) {
  note(fmt::format("space: session 0x{:08x}: {}", h, why));
  flush_session(h);
  end_session(h);
  std::erase(abandoned_, h);
}

}  // namespace tpmsec::server
