// The emulated chip's session and object slots and its context gap
// (slot_limits.h).
#include "tpmsec/emulation/slot_limits.h"

#include <algorithm>

#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

constexpr uint16_t kTagNoSessions = st::kNoSessions;
constexpr uint16_t kTagSessions = st::kSessions;
constexpr size_t kHeader = 10;

// Command codes, from the command table (command_table.h, commands.h).
constexpr uint32_t kCcStartAuthSession = cmd::StartAuthSession::kInfo.code;
constexpr uint32_t kCcContextLoad = cmd::ContextLoad::kInfo.code;
constexpr uint32_t kCcContextSave = cmd::ContextSave::kInfo.code;
constexpr uint32_t kCcStartup = cmd::Startup::kInfo.code;
constexpr uint32_t kCcGetCapability = cmd::GetCapability::kInfo.code;
constexpr uint16_t kSuClear = su::kClear;

constexpr uint32_t kCapHandles = cap::kHandles;
constexpr uint32_t kCapTpmProperties = cap::kTpmProperties;
constexpr uint32_t kFirstTransient = ht::kFirstTransient;
constexpr uint32_t kFirstLoadedSession = ht::kFirstLoadedSession;
// Saved sessions are listed with the policy-session type (TPM_HT_SAVED_SESSION = 0x03).
constexpr uint32_t kFirstSavedSession = ht::kFirstPolicySession;
constexpr uint32_t kRcSessionHandles = rc::kSessionHandles;

// Handles asked for per GetCapability (libtpms answers TPM_RC_VALUE above its
// MAX_CAP_HANDLES); more come in further rounds.
constexpr uint32_t kListCount = 64;
constexpr uint32_t kSlotMask = 0x00FFFFFF;  // a session's slot, whether listed as 0x02… or 0x03…

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

bool is_session(uint32_t handle) {
  uint8_t type = static_cast<uint8_t>(handle >> 24);
  return type == 0x02 || type == 0x03;
}

// A well-formed header: tag, size matching, at least 10 bytes.
bool framed(ByteView b) {
  if (b.size() < kHeader) return false;
  uint16_t tag = be16(b.data());
  return (tag == kTagNoSessions || tag == kTagSessions) && load_be32(b.data() + 2) == b.size();
}

Bytes refusal(uint32_t code) {
  Bytes r(kHeader);
  r[0] = kTagNoSessions >> 8;
  r[1] = kTagNoSessions & 0xFF;
  store_be32(r.data() + 2, kHeader);
  store_be32(r.data() + 6, code);
  return r;
}

Bytes get_capability(uint32_t capability, uint32_t property, uint32_t count) {
  Bytes c(22);
  c[0] = kTagNoSessions >> 8;
  c[1] = kTagNoSessions & 0xFF;
  store_be32(c.data() + 2, 22);
  store_be32(c.data() + 6, kCcGetCapability);
  store_be32(c.data() + 10, capability);
  store_be32(c.data() + 14, property);
  store_be32(c.data() + 18, count);
  return c;
}

bool contains(const std::vector<uint32_t>& handles, uint32_t handle) {
  return std::any_of(handles.begin(), handles.end(),
                     [&](uint32_t h) { return (h & kSlotMask) == (handle & kSlotMask); });
}

// Enforced only when the profile gives a limit below the wrapped TPM's own.
uint32_t lower(uint32_t profile, uint32_t own) { return profile != 0 && (own == 0 || profile < own) ? profile : 0; }

}  // namespace

SlotLimitTransport::SlotLimitTransport(Transport& inner, SlotLimits limits)
    : inner_(inner), profile_(std::move(limits)) {}

uint64_t SlotLimitTransport::refusals(uint32_t code) const {
  auto it = refused_.find(code);
  return it == refused_.end() ? 0 : it->second;
}

uint64_t SlotLimitTransport::counter_start() const { return uint64_t{loaded_max_} + 1; }

Status SlotLimitTransport::reset_tpm() {
  Status st = inner_.reset_tpm();
  saved_at_.clear();
  if (learned_) counter_ = counter_start();
  return st;
}

Result<std::vector<uint32_t>> SlotLimitTransport::list(uint32_t first) {
  std::vector<uint32_t> handles;
  uint32_t property = first;
  for (int round = 0; round < 64; ++round) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes r, inner_.transmit(get_capability(kCapHandles, property, kListCount)));
    if (!framed(r) || load_be32(r.data() + 6) != rc::kSuccess || r.size() < kHeader + 9) {
      return runtime_error("slot limits: the TPM did not list its handles");
    }
    const uint8_t more = r[kHeader];
    uint32_t count = load_be32(r.data() + kHeader + 5);
    if (count > (r.size() - kHeader - 9) / 4) return runtime_error("slot limits: a short handle list");
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t h = load_be32(r.data() + kHeader + 9 + 4 * i);
      // Sessions are listed as 0x02… or 0x03… (by type, not by the range
      // asked for), in slot order; anything else is past the range.
      if (first == kFirstTransient ? (h >> 24) != 0x80 : !is_session(h)) return handles;
      handles.push_back(h);
    }
    if (!more || count == 0) return handles;
    uint32_t next = (first & 0xFF000000) | ((handles.back() & kSlotMask) + 1);
    if (next <= property) return handles;
    property = next;
  }
  return handles;
}

Result<SlotLimitTransport::Usage> SlotLimitTransport::usage(bool sessions, bool objects) {
  Usage u;
  if (sessions) {
    TPMSEC_ASSIGN_OR_RETURN(u.loaded, list(kFirstLoadedSession));
    TPMSEC_ASSIGN_OR_RETURN(u.saved, list(kFirstSavedSession));
    // Forget what is no longer saved (loaded again or flushed).
    for (auto it = saved_at_.begin(); it != saved_at_.end();) {
      it = contains(u.saved, it->first) ? std::next(it) : saved_at_.erase(it);
    }
  }
  if (objects) {
    TPMSEC_ASSIGN_OR_RETURN(u.objects, list(kFirstTransient));
  }
  return u;
}

bool SlotLimitTransport::learn_limits() {
  if (learned_) return true;
  // TPM_PT_HR_TRANSIENT_MIN .. TPM_PT_CONTEXT_GAP_MAX.
  auto r = inner_.transmit(get_capability(kCapTpmProperties, pt::kHrTransientMin,
                                          pt::kContextGapMax - pt::kHrTransientMin + 1));
  if (!r.ok() || !framed(*r) || load_be32(r->data() + 6) != rc::kSuccess || r->size() < kHeader + 9) return false;
  const Bytes& b = *r;
  uint32_t count = load_be32(b.data() + kHeader + 5);
  if (count > (b.size() - kHeader - 9) / 8) return false;
  std::map<uint32_t, uint32_t> own;
  for (uint32_t i = 0; i < count; ++i) {
    own[load_be32(b.data() + kHeader + 9 + 8 * i)] = load_be32(b.data() + kHeader + 13 + 8 * i);
  }
  enforced_ = SlotLimits{};
  enforced_.source = profile_.source;
  enforced_.note = profile_.note;
  enforced_.max_loaded_sessions = lower(profile_.max_loaded_sessions, own[pt::kHrLoadedMin]);
  enforced_.max_transient_objects = lower(profile_.max_transient_objects, own[pt::kHrTransientMin]);
  enforced_.active_sessions_max = lower(profile_.active_sessions_max, own[pt::kActiveSessionsMax]);
  loaded_max_ = enforced_.max_loaded_sessions ? enforced_.max_loaded_sessions : own[pt::kHrLoadedMin];
  // The gap needs room for the values that mark loaded slots (and one more).
  uint32_t gap = lower(profile_.context_gap_max, own[pt::kContextGapMax]);
  enforced_.context_gap_max = gap > uint64_t{loaded_max_} + 1 ? gap : 0;
  counter_ = counter_start();
  learned_ = true;
  return true;
}

std::optional<std::pair<uint32_t, uint64_t>> SlotLimitTransport::oldest(const std::vector<uint32_t>& saved) const {
  std::optional<std::pair<uint32_t, uint64_t>> best;
  for (uint32_t h : saved) {
    auto it = saved_at_.find(h & kSlotMask);
    if (it == saved_at_.end()) continue;
    if (!best || it->second < best->second) best = std::pair{h & kSlotMask, it->second};
  }
  return best;
}

bool SlotLimitTransport::gap_at_max(const std::vector<uint32_t>& saved) const {
  if (enforced_.context_gap_max == 0) return false;
  auto o = oldest(saved);
  const uint64_t modulus = uint64_t{enforced_.context_gap_max} + 1;
  return o && o->second % modulus == counter_ % modulus;
}

uint32_t SlotLimitTransport::decide(ByteView command) {
  if (!framed(command)) return 0;  // the TPM answers malformed commands itself
  const uint32_t code = load_be32(command.data() + 6);
  const bool starts = code == kCcStartAuthSession;
  const bool loads = code == kCcContextLoad;
  const bool saves = code == kCcContextSave;
  // Every command whose response handle is new, other than a session's
  // start and a context's load, loads an object (the command table's
  // creates_handle: CreatePrimary, Load, LoadExternal, CreateLoaded,
  // HashSequenceStart, HMAC_Start).
  const CommandInfo* info = find_command(code);
  const bool creates_object = info && info->creates_handle && !starts && !loads;
  if (!starts && !loads && !saves && !creates_object) return 0;
  if (!learn_limits()) return 0;
  const SlotLimits& e = enforced_;
  const bool session_limits = e.max_loaded_sessions || e.active_sessions_max || e.context_gap_max;
  if (creates_object) {
    if (!e.max_transient_objects) return 0;
    auto u = usage(false, true);
    return u.ok() && u->objects.size() >= e.max_transient_objects ? rc::kObjectMemory : 0;
  }
  if (starts) {
    if (!session_limits) return 0;
    auto u = usage(true, false);
    if (!u.ok()) return 0;
    const size_t loaded = u->loaded.size();
    if (e.max_loaded_sessions && loaded >= e.max_loaded_sessions) return rc::kSessionMemory;
    if (loaded + 1 == loaded_max_ && gap_at_max(u->saved)) return rc::kContextGap;
    if (e.active_sessions_max && loaded + u->saved.size() >= e.active_sessions_max) return kRcSessionHandles;
    return 0;
  }
  if (saves) {
    if (!e.context_gap_max || command.size() < kHeader + 4) return 0;
    const uint32_t handle = load_be32(command.data() + kHeader);
    if (!is_session(handle)) return 0;
    auto u = usage(true, false);
    if (!u.ok() || !contains(u->loaded, handle)) return 0;  // not a loaded session: the TPM's own error
    return gap_at_max(u->saved) ? rc::kContextGap : 0;
  }
  // ContextLoad: TPMS_CONTEXT = sequence (8), savedHandle (4), ...
  if (command.size() < kHeader + 12) return 0;
  const uint32_t saved_handle = load_be32(command.data() + kHeader + 8);
  if (is_session(saved_handle)) {
    if (!session_limits) return 0;
    auto u = usage(true, false);
    if (!u.ok() || !contains(u->saved, saved_handle)) return 0;  // not saved: the TPM's own error
    const size_t loaded = u->loaded.size();
    if (e.max_loaded_sessions && loaded >= e.max_loaded_sessions) return rc::kSessionMemory;
    if (loaded + 1 == loaded_max_ && gap_at_max(u->saved)) {
      auto o = oldest(u->saved);
      if (o && o->first != (saved_handle & kSlotMask)) return rc::kContextGap;
    }
    return 0;
  }
  if (!e.max_transient_objects) return 0;
  auto u = usage(false, true);
  return u.ok() && u->objects.size() >= e.max_transient_objects ? rc::kObjectMemory : 0;
}

void SlotLimitTransport::observe(ByteView command, ByteView response) {
  if (!learned_ || !framed(command) || !framed(response) || load_be32(response.data() + 6) != rc::kSuccess) return;
  const uint32_t code = load_be32(command.data() + 6);
  if (code == kCcContextSave && command.size() >= kHeader + 4) {
    const uint32_t handle = load_be32(command.data() + kHeader);
    if (!is_session(handle) || enforced_.context_gap_max == 0) return;
    saved_at_[handle & kSlotMask] = counter_;
    ++counter_;
    const uint64_t modulus = uint64_t{enforced_.context_gap_max} + 1;
    if (counter_ % modulus == 0) counter_ += uint64_t{loaded_max_} + 1;
    return;
  }
  if (code == kCcStartup && command.size() >= kHeader + 2 && be16(command.data() + kHeader) == kSuClear) {
    // A TPM Reset (no saved session survived) restarts the counter; a TPM
    // Restart keeps the saved sessions and the counter.
    auto saved = list(kFirstSavedSession);
    if (saved.ok() && saved->empty()) {
      saved_at_.clear();
      counter_ = counter_start();
    }
  }
}

Result<Bytes> SlotLimitTransport::transmit(ByteView command) {
  if (uint32_t code = decide(command); code != 0) {
    ++refusals_;
    ++refused_[code];
    return refusal(code);
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes response, inner_.transmit(command));
  observe(command, response);
  return response;
}

}  // namespace tpmsec
