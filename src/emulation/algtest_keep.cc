// An earlier profile's values kept over an import's (algtest_keep.h).
#include "algtest_keep.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace tpmsec::algtest {
namespace {

// Whether an earlier profile's value beats the imported one: its M values,
// and its D values where the import is not M. A D value an earlier import
// made by a rule A* is not kept: re-importing must apply today's rules.
// Neither is an M value an earlier import made (it has runs): re-importing
// the same runs must give the same profile.
bool earlier_is_better(const LatencyValue& kept_value, const LatencyValue& imported) {
  if (kept_value.runs > 0) return false;
  if (kept_value.tag == kTagMeasured) return true;
  return kept_value.tag == kTagDerived && imported.tag != kTagMeasured && kept_value.note.rfind("rule A", 0) != 0;
}

// Replaces the imported values the earlier profile beats; the names of those kept.
std::vector<std::string> keep_better_values(LatencyProfile& p, const LatencyProfile& k) {
  std::vector<std::string> kept_names;
  for (auto& [variant, value] : p.commands) {
    auto it = k.commands.find(variant);
    if (it != k.commands.end() && earlier_is_better(it->second, value)) {
      value = it->second;
      kept_names.push_back(variant);
    }
  }
  if (earlier_is_better(k.hmac_session, p.hmac_session)) {
    p.hmac_session = k.hmac_session;
    kept_names.push_back("hmac_session");
  }
  if (earlier_is_better(k.param_encryption_per_byte, p.param_encryption_per_byte)) {
    p.param_encryption_per_byte = k.param_encryption_per_byte;
    kept_names.push_back("param_encryption_per_byte");
  }
  return kept_names;
}

// The earlier profile's tail events, but for CreatePrimary.rsa's (the
// import's own, from its key generations), followed by the import's.
void keep_tail_events(LatencyProfile& p, const LatencyProfile& k) {
  std::vector<TailEvent> tails;
  for (const TailEvent& t : k.tail_events) {
    if (t.variant != "CreatePrimary.rsa") tails.push_back(t);
  }
  for (const TailEvent& t : p.tail_events) tails.push_back(t);
  p.tail_events = tails;
}

// The E rules T1 and 5 scale FlushContext and ContextLoad of a key: when
// those were kept as measured, the estimates follow them, as in the earlier profile.
void rescale_estimates(LatencyProfile& p, const Builder& b) {
  const LatencyValue& flush = p.commands["FlushContext"];
  if (flush.tag == kTagMeasured) {
    for (const char* v : {"ContextSave.object", "ContextSave.session"}) {
      LatencyValue& save = p.commands[v];
      if (save.tag != kTagEstimate) continue;
      save = b.derived(
          4 * flush.ms, kTagEstimate, "tpmsec rule T1",
          fmt::format("tpmsec rule T1: ContextSave ~ 4 x FlushContext = 4 x {:.2f} ms (M, {})", flush.ms, flush.source),
          0);
    }
  }
  const LatencyValue& load_object = p.commands["ContextLoad.object"];
  if (load_object.tag == kTagMeasured && p.commands["ContextLoad.session"].tag == kTagEstimate) {
    p.commands["ContextLoad.session"] = b.derived(
        load_object.ms, kTagEstimate, "E rule 5",
        fmt::format("E rule 5: ContextLoad of a session is measured on no chip; = ContextLoad of a key {:.2f} ms "
                    "(M, {}), the seed thread's guess and an upper bound",
                    load_object.ms, load_object.source),
        0);
  }
}

}  // namespace

void keep_earlier(LatencyProfile& p, const LatencyProfile& k, const Builder& b) {
  std::vector<std::string> kept_names = keep_better_values(p, k);
  keep_tail_events(p, k);
  rescale_estimates(p, b);
  p.identity.bus = k.identity.bus;
  p.seed = k.seed;
  if (kept_names.empty()) return;
  p.note += fmt::format(" Kept from the earlier profile (measured beats derived): {}.", fmt::join(kept_names, ", "));
  // The earlier profile's own note, not one an earlier import wrote.
  std::string earlier = k.note;
  if (earlier.find("tpm2-algtest run") != std::string::npos) {
    size_t at = earlier.find(" Its note: ");
    earlier = at == std::string::npos ? std::string() : earlier.substr(at + 11);
  }
  if (!earlier.empty()) p.note += " Its note: " + earlier;
}

}  // namespace tpmsec::algtest
