// The PCR values a crypto-agile event log implies.
#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/constants.h"
#include "tpmsec/pcr.h"
#include "tpmsec/replay/event_log.h"

namespace tpmsec::event_log {

Result<std::map<uint32_t, Bytes>> replay_event_log(const EventLog& log, uint16_t bank) {
  auto listed = std::find_if(log.spec_id.algorithms.begin(), log.spec_id.algorithms.end(),
                             [&](const AlgorithmSize& a) { return a.algorithm == bank; });
  if (listed == log.spec_id.algorithms.end()) {
    return unsupported_error(fmt::format("the event log has no {} bank", hash_name(bank)));
  }
  if (!digest_size(bank)) {
    return unsupported_error(fmt::format("tpmsec cannot hash the log's bank 0x{:04x}", bank));
  }
  std::map<uint32_t, Bytes> pcrs;
  if (log.startup_locality || log.hcrtm) {
    // The bank's own size, not the one the log's Spec ID event claims.
    Bytes initial(*digest_size(bank), 0);
    initial.back() = log.pcr0_locality();
    pcrs.emplace(0, std::move(initial));
  }
  for (const Event& e : log.events) {
    if (e.event_type == kEvNoAction) continue;
    const Bytes* digest = e.digest_for(bank);
    if (digest == nullptr) {
      return parse_error(fmt::format("event {} at offset {} has no {} digest", e.index, e.offset, hash_name(bank)));
    }
    auto [it, inserted] = pcrs.try_emplace(e.pcr, Bytes(listed->digest_size, 0));
    TPMSEC_ASSIGN_OR_RETURN(it->second, pcr_extended_value(bank, it->second, *digest));
  }
  return pcrs;
}

}  // namespace tpmsec::event_log
