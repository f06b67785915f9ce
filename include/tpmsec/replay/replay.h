// Replaying a workload of PCR extends through a strategy: the engine under
// `tpmsec replay` (IMA logs, firmware event logs) and `tpmsec predict`.
//
// The digests go into one PCR through an ExtendStream, so every strategy's
// protection and recovery apply; each extend is timed on the TPM's clock
// (virtual when emulating), and the PCR is read at the end and compared
// with the value computed from the digests.
#ifndef TPMSEC_REPLAY_REPLAY_H_
#define TPMSEC_REPLAY_REPLAY_H_

#include <atomic>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/measure/measured_tpm.h"
#include "tpmsec/measure/openmetrics.h"
#include "tpmsec/measure/statistics.h"
#include "tpmsec/replay/ima_log.h"
#include "tpmsec/strategy.h"

namespace tpmsec {

struct ReplayOptions {
  StrategyKind strategy = StrategyKind::kResident;
  uint32_t pcr = 16;
  uint16_t bank = alg::kSha256;
  uint32_t checkpoint_every = 100;
  // Reset the PCR first (16 and 23 only); otherwise the replay starts from
  // the PCR's current value.
  bool reset_first = true;
  ProtectionConfig protection;
  std::function<void(size_t done, size_t total)> progress;
  const std::atomic<bool>* stop = nullptr;  // raised: stop after the current extend, still clean up
};

struct ReplayRun {
  StrategyKind strategy = StrategyKind::kResident;
  uint32_t pcr = 0;
  uint16_t bank = 0;
  size_t extends = 0;  // extends done (all of them unless interrupted)
  Bytes initial;       // the PCR before the first extend
  Bytes expected;      // computed from `initial` and the digests extended
  Bytes actual;        // read from the TPM at the end
  bool verified = false;
  std::vector<double> per_extend_ms;  // on the TPM's clock
  Distribution per_extend;
  double total_ms = 0;   // open + extends + finish
  double open_ms = 0;    // the stream's set-up (null key, audited baseline read)
  double finish_ms = 0;  // its tear-down (checkpoint's final verification)
  // The TPM's share of total_ms: under emulation exactly the modelled TPM
  // time of the run's commands, else their traced durations. total_ms also
  // holds the host's real work, which varies with the machine (and its
  // sanitizers): compare emulated runs on this, not on total_ms.
  double tpm_ms = 0;
  size_t tpm_commands = 0;
  StreamStats stats;
  bool interrupted = false;
  // Trace records of the run, [records_begin, records_end) of tpm.log;
  // extend i's are [extend_records[i], extend_records[i + 1]).
  size_t records_begin = 0, records_end = 0;
  std::vector<size_t> extend_records;
};

// Extends `digests` (each the bank's digest size) into options.pcr of `tpm`.
Result<ReplayRun> replay_digests(MeasuredTpm& tpm, std::span<const Bytes> digests, const ReplayOptions& options);
// A run as `tpmsec replay --json` writes it.
nlohmann::json to_json(const ReplayRun& run);
// The runs' extends as one strategy's metrics (an event log's PCRs are
// replayed one after the other, all through the same strategy), for
// openmetrics_text().
StrategyMetrics replay_metrics(StrategyKind kind, const std::vector<ReplayRun>& runs);

// The same run as it would have taken on `profile`: every recorded command
// of [run.records_begin, run.records_end) priced by a fresh LatencyModel, in
// order. Commands do not depend on timing, so this equals running behind a
// LatencyTransport with that profile from the same starting point.
struct PricedRun {
  double total_ms = 0;
  Distribution per_extend;
};
PricedRun price_run(const ReplayRun& run, const TraceLog& log, const LatencyProfile& profile,
                    size_t model_from_record = 0);

// An IMA log as a workload: the digests the kernel would extend into `bank`,
// one per entry. With `skip_bad` the bad entries are left out; otherwise the
// workload stops before the first one, and `stopped_at` says where and why.
// A partial entry at the end (ima::ParsedLog::tail) is no bad entry: it is
// left out and named in `tail`, for the caller to warn about or refuse.
// `hash_bank`: the template-hash column's bank when the caller knows it (a
// per-bank list's file name, ima::bank_from_file_name).
struct ImaWorkload {
  ima::LogFormat format = ima::LogFormat::kAscii;
  uint16_t hash_bank = 0;                   // the template-hash column's bank
  std::optional<ima::Tail> tail;            // a partial entry at the end
  size_t entries = 0;                       // good entries in the log
  std::map<std::string, size_t> templates;  // good entries by template name
  size_t violations = 0;
  std::vector<Bytes> digests;
  std::vector<ima::Entry> kept;  // the entries `digests` come from, in order
  std::vector<ima::Problem> problems;
  std::optional<ima::Problem> stopped_at;
};
Result<ImaWorkload> ima_workload(ByteView log, uint16_t bank, bool skip_bad,
                                 std::optional<uint16_t> hash_bank = std::nullopt);

}  // namespace tpmsec

#endif  // TPMSEC_REPLAY_REPLAY_H_
