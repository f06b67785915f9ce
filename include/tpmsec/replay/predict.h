// `tpmsec predict`: what a workload of PCR extends (an IMA log) would add to
// boot time on each profiled TPM under each strategy.
//
// Each strategy replays the workload once on the given (embedded) TPM and
// records every command; each profile's latency model then prices that
// record (replay.h, price_run). The commands do not depend on timing, so
// this is what replaying under every profile would give, in one replay per
// strategy: 12,000 extends x 10 profiles x 5 strategies take seconds.
#ifndef TPMSEC_REPLAY_PREDICT_H_
#define TPMSEC_REPLAY_PREDICT_H_

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/replay/replay.h"

namespace tpmsec {

struct PredictOptions {
  std::vector<StrategyKind> strategies;  // empty: all
  std::vector<LatencyProfile> profiles;
  ReplayOptions replay;  // pcr, bank, progress, stop (strategy is set per run)
  std::string workload;  // what the digests are, for reports ("IMA log x (12313 entries)")
};

struct PredictCell {
  double total_ms = 0;  // TPM time of the whole replay (stream set-up, extends, tear-down)
  double added_ms = 0;  // total_ms less plain's under the same profile
  Distribution per_extend;
  // The range (docs/latency-profiles.md, "Uncertainty"): the same replay
  // priced with every value of the profile at its low, then high end.
  double total_low_ms = 0, total_high_ms = 0;
  double per_extend_low_ms = 0, per_extend_high_ms = 0;  // medians
  double estimated_share = 0;  // of the per-extend median from E values (priced with estimated_part)
};

struct Prediction {
  std::string workload;
  size_t extends = 0;
  std::vector<StrategyKind> strategies;
  std::vector<std::string> profile_ids, profile_names;
  std::vector<std::vector<PredictCell>> cells;  // [profile][strategy]
  std::vector<size_t> tpm_commands;             // per strategy
  bool verified = true;                         // every replay left the PCR as computed
  bool interrupted = false;
};

Result<Prediction> predict(Transport& base, std::span<const Bytes> digests, const PredictOptions& options);

std::string predict_text(const Prediction& p);
nlohmann::json predict_json(const Prediction& p);  // "schema": "tpmsec-predict/1"
std::string predict_svg(const Prediction& p);      // added boot time, grouped by profile

}  // namespace tpmsec

#endif  // TPMSEC_REPLAY_PREDICT_H_
