#include "tpmsec/handle_ledger.h"

#include <fmt/format.h>

#include "tpmsec/constants.h"

namespace tpmsec {
namespace {

std::string_view type_name(uint8_t type) {
  switch (type) {
    case ht::kTransient:
      return "transient object";
    case ht::kHmacSession:
      return "HMAC session";
    case ht::kPolicySession:
      return "policy session";
    default:
      return "tracked";
  }
}

}  // namespace

bool HandleLedger::tracked(uint32_t handle) { return (handle >> 24) == ht::kTransient || ht::is_session(handle); }

uint32_t HandleLedger::slot(uint32_t handle) {
  return ht::is_session(handle) ? ht::kFirstHmacSession | (handle & 0x00FFFFFF) : handle;
}

uint8_t HandleLedger::kind_bit(uint8_t type) {
  switch (type) {
    case ht::kTransient:
      return 1;
    case ht::kHmacSession:
      return 2;
    case ht::kPolicySession:
      return 4;
    default:
      return 0;
  }
}

void HandleLedger::need_flush(uint32_t handle) {
  if (!tracked(handle)) return;
  pending_.unflushed.insert(handle);
  need_sweep(static_cast<uint8_t>(handle >> 24));
}

HandleLedger::Sweep HandleLedger::take_sweep() {
  Sweep out = std::move(pending_);
  pending_ = {};
  return out;
}

void HandleLedger::give_back(Sweep undone) {
  pending_.kinds |= undone.kinds;
  pending_.unflushed.insert(undone.unflushed.begin(), undone.unflushed.end());
}

void HandleLedger::set_baseline(std::span<const uint32_t> present) {
  foreign_.clear();
  for (uint32_t h : present) {
    if (tracked(h)) foreign_.insert(slot(h));
  }
  has_baseline_ = true;
}

void HandleLedger::add_foreign(uint32_t handle) {
  if (tracked(handle) && !owns(handle)) foreign_.insert(slot(handle));
}

Status HandleLedger::adopt(std::string_view command, const CreatedHandle& expected, uint32_t handle) {
  if (expected.reloads) {
    // Nothing new exists: the session is still the one this Tpm owns (or
    // does not), whatever the response says.
    if (handle != expected.reloads) {
      return integrity_error(
          fmt::format("{} returned 0x{:08x} for session 0x{:08x}", command, handle, expected.reloads));
    }
    return ok_status();
  }
  if ((handle >> 24) != expected.type) {
    return integrity_error(
        fmt::format("{} response names 0x{:08x}, not a {} handle", command, handle, type_name(expected.type)));
  }
  if (owns(handle) || foreign(handle)) {
    return integrity_error(fmt::format("{} response names handle 0x{:08x} already in use", command, handle));
  }
  owned_.insert(slot(handle));
  saved_.erase(slot(handle));
  return ok_status();
}

void HandleLedger::note_saved(uint32_t handle, bool saved) {
  if (!owns(handle) || !ht::is_session(handle)) return;
  if (saved) {
    saved_.insert(slot(handle));
  } else {
    saved_.erase(slot(handle));
  }
}

std::vector<HeldHandle> HandleLedger::held() const {
  std::set<uint32_t> all(owned_.begin(), owned_.end());
  for (uint32_t h : pending_.unflushed) all.insert(slot(h));
  std::vector<HeldHandle> out;
  for (uint32_t h : all) out.push_back({h, saved_.count(h) != 0});
  return out;
}

std::vector<uint32_t> HandleLedger::strays(std::span<const uint32_t> listed) const {
  std::vector<uint32_t> out;
  std::set<uint32_t> seen;
  for (uint32_t h : listed) {
    if (!tracked(h) || owns(h) || foreign(h) || !seen.insert(slot(h)).second) continue;
    out.push_back(h);
  }
  return out;
}

}  // namespace tpmsec
