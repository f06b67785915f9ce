#include "tpmsec/held_handles.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "tpmsec/commands.h"
#include "tpmsec/constants.h"

namespace tpmsec {
namespace {

// Where the TPM lists a recorded handle: among the transient objects, the
// loaded sessions or the saved sessions (Part 2 §7.2, Part 3 §30.2).
uint32_t listed_under(const HeldHandle& h) {
  if (!ht::is_session(h.handle)) return ht::kFirstTransient;
  return h.saved ? ht::kFirstSavedSession : ht::kFirstLoadedSession;
}

// The TPM's listings of the ranges `stale` needs, as slots (a session is
// listed as 0x02… or 0x03… by type; HandleLedger::slot()).
Result<std::map<uint32_t, std::set<uint32_t>>> listings_for(Tpm& tpm, const std::vector<HeldHandlesRecord>& stale) {
  std::map<uint32_t, std::set<uint32_t>> out;
  for (const HeldHandlesRecord& r : stale) {
    for (const HeldHandle& h : r.handles) {
      uint32_t range = listed_under(h);
      if (out.count(range)) continue;
      TPMSEC_ASSIGN_OR_RETURN(std::vector<uint32_t> listed, tpm.list_handles(range));
      std::set<uint32_t>& slots = out[range];
      for (uint32_t l : listed) slots.insert(HandleLedger::slot(l));
    }
  }
  return out;
}

// Flushes each handle of `record` the TPM lists as recorded. Gone by the
// flush counts as flushed.
Status flush_record(Tpm& tpm, const HeldHandlesRecord& record, const std::map<uint32_t, std::set<uint32_t>>& listed,
                    StaleHandles& done) {
  for (const HeldHandle& h : record.handles) {
    auto it = listed.find(listed_under(h));
    if (it == listed.end() || !it->second.count(HandleLedger::slot(h.handle))) continue;
    auto r = tpm.run(cmd::FlushContext{h.handle});
    if (!r.ok() && !handle_gone(r.error())) {
      return r.error().with_context(fmt::format("flushing 0x{:08x}, left by process {}", h.handle, record.owner.pid));
    }
    // Its number is free: nothing a baseline listed under it is still there.
    tpm.foreign_flushed(h.handle);
    if (r.ok()) done.flushed.push_back(h.handle);
  }
  return ok_status();
}

}  // namespace

Result<StaleHandles> flush_stale_handles(Tpm& tpm, HostState& host, const TpmId& tpm_id, const std::string& boot) {
  StaleHandles done;
  std::vector<HeldHandlesRecord> stale;
  for (HeldHandlesRecord& r : host.held_handles(tpm_id)) {
    if (r.boot != boot) {
      r.handles.clear();  // removes it
      TPMSEC_RETURN_IF_ERROR(host.put_held_handles(tpm_id, r));
      ++done.records;
    } else if (!host.process_runs(r.owner)) {
      stale.push_back(std::move(r));
    }
  }
  if (stale.empty()) return done;
  const bool flushes = !tpm.transport().private_handles() && !tpm.transport().in_process();
  std::map<uint32_t, std::set<uint32_t>> listed;
  if (flushes) {
    TPMSEC_ASSIGN_OR_RETURN(listed, listings_for(tpm, stale));
  }
  for (HeldHandlesRecord& r : stale) {
    if (flushes) TPMSEC_RETURN_IF_ERROR(flush_record(tpm, r, listed, done));
    r.handles.clear();
    TPMSEC_RETURN_IF_ERROR(host.put_held_handles(tpm_id, r));
    ++done.records;
  }
  return done;
}

Status track_held_handles(Tpm& tpm, std::shared_ptr<HostState> host, TpmId tpm_id, std::string boot,
                          std::function<void(std::string_view)> warn) {
  // One record per Tpm a process tracks.
  static std::atomic<uint64_t> contexts{0};
  TPMSEC_ASSIGN_OR_RETURN(ProcessStamp self, host->this_process());
  HeldHandlesRecord record;
  record.owner = self;
  record.context = ++contexts;
  record.boot = std::move(boot);
  tpm.watch_held([host = std::move(host), tpm_id = std::move(tpm_id), record = std::move(record),
                  warn = std::move(warn), warned = false](const std::vector<HeldHandle>& held) mutable {
    record.handles = held;
    Status st = host->put_held_handles(tpm_id, record);
    if (!st.ok() && warn && !warned) {
      warned = true;
      warn(
          fmt::format("warning: what this process holds on the TPM is not recorded, so a crash would leave it "
                      "there: {}",
                      st.error().message()));
    }
  });
  return ok_status();
}

}  // namespace tpmsec
