#include "tpmsec/replay/replay.h"

namespace tpmsec {

Result<ImaWorkload> ima_workload(ByteView log, uint16_t bank, bool skip_bad, std::optional<uint16_t> hash_bank) {
  TPMSEC_ASSIGN_OR_RETURN(ima::ParsedLog parsed, ima::parse_log(log, hash_bank));
  ImaWorkload w;
  w.format = parsed.format;
  w.hash_bank = parsed.hash_bank;
  if (parsed.tail) {
    // The partial entry at the end is reported apart: it is no bad entry
    // to stop at, and the whole entries before it are replayed.
    w.tail = parsed.tail;
    parsed.problems.pop_back();
  }
  w.problems = parsed.problems;
  std::span<const ima::Entry> entries(parsed.entries);
  if (!skip_bad && !parsed.problems.empty()) {
    entries = parsed.entries_before_first_problem();
    w.stopped_at = parsed.problems.front();
  }
  w.entries = parsed.entries.size();
  w.digests.reserve(entries.size());
  for (const ima::Entry& e : entries) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes d, ima::extend_digest(e, bank));
    w.digests.push_back(std::move(d));
    w.kept.push_back(e);
    ++w.templates[e.template_name];
    if (e.violation) ++w.violations;
  }
  return w;
}

}  // namespace tpmsec
