// A profile's identity and slot limits from the kept runs (algtest_identity.h).
#include "algtest_identity.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "algtest_files.h"

namespace tpmsec::algtest {

ReferenceRun reference_run(const std::vector<const AlgtestRun*>& kept) {
  std::map<std::string, size_t> fw_count;
  for (const AlgtestRun* r : kept) ++fw_count[r->firmware];
  ReferenceRun ref;
  ref.firmware =
      std::max_element(fw_count.begin(), fw_count.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  ref.run = kept[0];
  for (const AlgtestRun* r : kept) {
    if (r->firmware == ref.firmware) {
      ref.run = r;
      break;
    }
  }
  return ref;
}

// ---------------------------------------------------------------- identity and slots

void set_identity(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const ReferenceRun& reference,
                  const AlgtestImportOptions& options, const std::string& source) {
  const AlgtestRun* ref = reference.run;
  std::set<std::string> fulls, devices;
  for (const AlgtestRun* r : kept) {
    fulls.insert(r->firmware_full);
    if (!r->device.empty()) devices.insert(r->device);
  }
  std::string vendor;
  for (const std::string& v : ref->vendor_strings) vendor += v;
  std::set<std::string> vendors;
  for (const AlgtestRun* r : kept) {
    std::string v;
    for (const std::string& part : r->vendor_strings) v += part;
    vendors.insert(v);
  }
  p.name = options.name.empty() ? fmt::format("{} {}", item_text(ref->manufacturer), vendor) : options.name;
  p.identity.manufacturer = ref->manufacturer;
  // Vendor strings the kept runs agree on, up to the first that differs
  // (policy rules match them as a prefix; NPCT75x parts vary in the third).
  for (size_t i = 0; i < 4; ++i) {
    bool agree = std::all_of(kept.begin(), kept.end(),
                             [&](const AlgtestRun* r) { return r->vendor_strings[i] == ref->vendor_strings[i]; });
    if (!agree) break;
    p.identity.vendor_strings[i] = ref->vendor_strings[i];
  }
  p.identity.firmware = reference.firmware;
  p.identity.bus = "unknown (kernel driver)";  // algtest does not record the bus
  p.identity.source = fmt::format("{} {} (detail/Capability_properties-fixed.txt)", source, ref->label);
  p.identity.note = fmt::format(
      "vendor strings of the merged runs: {} (the profile keeps those they share); firmware "
      "versions: {}; machines: {}",
      fmt::join(vendors, ", "), fmt::join(fulls, ", "),
      devices.empty() ? "not recorded" : fmt::format("{}", fmt::join(devices, ", ")));
}

void set_slots(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const ReferenceRun& reference,
               const std::string& source) {
  const AlgtestRun* ref = reference.run;
  std::map<std::string, size_t> slot_count;
  for (const AlgtestRun* r : kept) {
    ++slot_count[fmt::format("{}/{}/{}/{}", r->loaded_sessions, r->transient_objects, r->active_sessions_max,
                             r->context_gap_max)];
  }
  if (!ref->loaded_sessions && !ref->transient_objects) return;
  // Runs of one firmware line can disagree (NPCT75x 7.2.0.x: 3 slots, gap
  // 65535; 7.2.1/7.2.2: 5 slots, gap 255). Each limit is the strictest a
  // merged run reports (0: not reported), so a strategy that copes with
  // the emulated chip copes with every part the profile stands for.
  auto strictest = [&](uint32_t AlgtestRun::*field) {
    uint32_t v = 0;
    for (const AlgtestRun* r : kept) {
      if (r->*field && (v == 0 || r->*field < v)) v = r->*field;
    }
    return v;
  };
  p.slots.max_loaded_sessions = strictest(&AlgtestRun::loaded_sessions);
  p.slots.max_transient_objects = strictest(&AlgtestRun::transient_objects);
  p.slots.active_sessions_max = strictest(&AlgtestRun::active_sessions_max);
  p.slots.context_gap_max = strictest(&AlgtestRun::context_gap_max);
  p.slots.source = fmt::format(
      "{} {} (M: TPM2_PT_HR_LOADED_MIN, TPM2_PT_HR_TRANSIENT_MIN, "
      "TPM2_PT_ACTIVE_SESSIONS_MAX, TPM2_PT_CONTEXT_GAP_MAX)",
      source, ref->label);
  if (slot_count.size() == 1) {
    p.slots.note = "the TPM's own fixed properties; every merged run reports the same";
    return;
  }
  std::vector<std::string> reported;
  for (auto& [k, n] : slot_count) reported.push_back(fmt::format("{} x{}", k, n));
  p.slots.note = fmt::format(
      "the strictest of the TPM's own fixed properties of firmware {} (each limit the "
      "lowest a merged run reports); the merged runs report "
      "(sessions/objects/active/gap): {}",
      reference.firmware, fmt::join(reported, ", "));
}

}  // namespace tpmsec::algtest
