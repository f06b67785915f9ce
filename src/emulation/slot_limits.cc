// The emulated chip's session and object slots and its context gap
// (slot_limits.h).
#include "tpmsec/emulation/slot_limits.h"

#include <algorithm>
#include <optional>

#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

constexpr uint32_t kSlotMask = 0x00FFFFFF;  // a session's slot, whether listed as 0x02… or 0x03…

bool contains(const std::vector<uint32_t>& handles, uint32_t handle) {
  return std::any_of(handles.begin(), handles.end(),
                     [&](uint32_t h) { return (h & kSlotMask) == (handle & kSlotMask); });
}

// Enforced only when the profile gives a limit below the wrapped TPM's own.
uint32_t lower(uint32_t profile, uint32_t own) { return profile != 0 && (own == 0 || profile < own) ? profile : 0; }

}  // namespace

SlotLimitTransport::SlotLimitTransport(Transport& inner, SlotLimits limits)
    : TransportDecorator(inner, Traffic::kObserves), profile_(std::move(limits)) {}

uint64_t SlotLimitTransport::refusals(uint32_t code) const {
  auto it = refused_.find(code);
  return it == refused_.end() ? 0 : it->second;
}

uint64_t SlotLimitTransport::counter_start() const { return uint64_t{loaded_max_} + 1; }

Status SlotLimitTransport::reset_tpm() {
  Status st = inner().reset_tpm();
  saved_at_.clear();
  if (learned_) counter_ = counter_start();
  return st;
}

Result<std::vector<uint32_t>> SlotLimitTransport::list(uint32_t first) {
  // The TPM's own listing, through the command pipeline (not the chip's
  // clients: these stand for what its firmware knows, and are not billed).
  Tpm tpm(inner());
  auto listed = tpm.list_handles(first);
  if (!listed.ok()) return runtime_error("slot limits: the TPM did not list its handles: " + listed.error().message());
  return std::move(*listed);
}

Result<SlotLimitTransport::Usage> SlotLimitTransport::usage(bool sessions, bool objects) {
  Usage u;
  if (sessions) {
    TPMSEC_ASSIGN_OR_RETURN(u.loaded, list(ht::kFirstLoadedSession));
    TPMSEC_ASSIGN_OR_RETURN(u.saved, list(ht::kFirstSavedSession));
    // Forget what is no longer saved (loaded again or flushed).
    for (auto it = saved_at_.begin(); it != saved_at_.end();) {
      it = contains(u.saved, it->first) ? std::next(it) : saved_at_.erase(it);
    }
  }
  if (objects) {
    TPMSEC_ASSIGN_OR_RETURN(u.objects, list(ht::kFirstTransient));
  }
  return u;
}

bool SlotLimitTransport::learn_limits() {
  if (learned_) return true;
  // TPM_PT_HR_TRANSIENT_MIN .. TPM_PT_CONTEXT_GAP_MAX.
  Tpm tpm(inner());
  auto r = tpm.run(
      cmd::GetCapability{cap::kTpmProperties, pt::kHrTransientMin, pt::kContextGapMax - pt::kHrTransientMin + 1});
  if (!r.ok()) return false;
  std::map<uint32_t, uint32_t> own;
  for (const TaggedProperty& p : r->capability_data.properties) own[p.property] = p.value;
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
  // The areas by the core's frame codec; the TPM answers what it cannot read.
  auto areas = read_command_areas(command, command.size());
  if (!areas.ok()) return 0;
  const uint32_t code = areas->info->code;
  const bool starts = code == cc::kStartAuthSession;
  const bool loads = code == cc::kContextLoad;
  const bool saves = code == cc::kContextSave;
  // Every command whose response handle is new, other than a session's
  // start and a context's load, loads an object (the command table's
  // creates_handle: CreatePrimary, Load, LoadExternal, CreateLoaded,
  // HashSequenceStart, HMAC_Start).
  const bool creates_object = areas->info->creates_handle && !starts && !loads;
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
    if (e.active_sessions_max && loaded + u->saved.size() >= e.active_sessions_max) return rc::kSessionHandles;
    return 0;
  }
  if (saves) {
    if (!e.context_gap_max || areas->handles.empty()) return 0;
    const uint32_t handle = areas->handles[0];
    if (!ht::is_session(handle)) return 0;
    auto u = usage(true, false);
    if (!u.ok() || !contains(u->loaded, handle)) return 0;  // not a loaded session: the TPM's own error
    return gap_at_max(u->saved) ? rc::kContextGap : 0;
  }
  // ContextLoad: the context's savedHandle.
  const std::optional<uint32_t> saved = read_context_saved_handle(areas->parameters);
  if (!saved) return 0;
  const uint32_t saved_handle = *saved;
  if (ht::is_session(saved_handle)) {
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
  if (!learned_ || !succeeded(response)) return;
  auto areas = read_command_areas(command, command.size());
  if (!areas.ok()) return;
  const uint32_t code = areas->info->code;
  const ByteView params = areas->parameters;
  if (code == cc::kContextSave && !areas->handles.empty()) {
    const uint32_t handle = areas->handles[0];
    if (!ht::is_session(handle) || enforced_.context_gap_max == 0) return;
    saved_at_[handle & kSlotMask] = counter_;
    ++counter_;
    const uint64_t modulus = uint64_t{enforced_.context_gap_max} + 1;
    if (counter_ % modulus == 0) counter_ += uint64_t{loaded_max_} + 1;
    return;
  }
  Reader startup(params);
  if (code == cc::kStartup && startup.u16("startupType") == su::kClear && startup.ok()) {
    // A TPM Reset (no saved session survived) restarts the counter; a TPM
    // Restart keeps the saved sessions and the counter.
    auto saved = list(ht::kFirstSavedSession);
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
    return error_frame(code);
  }
  TPMSEC_ASSIGN_OR_RETURN(Bytes response, inner().transmit(command));
  observe(command, response);
  return response;
}

}  // namespace tpmsec
