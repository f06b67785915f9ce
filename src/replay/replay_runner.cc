#include <fmt/format.h>

#include "tpmsec/measure/openmetrics.h"
#include "tpmsec/pcr.h"
#include "tpmsec/replay/replay.h"

namespace tpmsec {
namespace {

double ms_between(int64_t from_ns, int64_t to_ns) { return static_cast<double>(to_ns - from_ns) / 1e6; }

}  // namespace

Result<ReplayRun> replay_digests(MeasuredTpm& tpm, std::span<const Bytes> digests, const ReplayOptions& options) {
  ReplayRun run;
  run.strategy = options.strategy;
  run.pcr = options.pcr;
  run.bank = options.bank;
  TPMSEC_RETURN_IF_ERROR(check_pcr(tpm.info, options.bank, options.pcr));
  for (const Bytes& d : digests) TPMSEC_RETURN_IF_ERROR(check_digest_length(options.bank, d));
  Tpm& t = *tpm.tpm;
  const Clock& clock = *tpm.clock;

  if (options.reset_first) {
    if (!pcr_resettable(options.pcr)) {
      return usage_error(
          fmt::format("PCR {} cannot be reset: replay into 16 or 23, or start from its value", options.pcr));
    }
    TPMSEC_RETURN_IF_ERROR(pcr_reset(t, options.pcr));
  }
  TPMSEC_ASSIGN_OR_RETURN(run.initial, pcr_read(t, options.bank, options.pcr));

  run.records_begin = tpm.log.size();
  int64_t modelled_before = tpm.latency ? tpm.latency->modelled_ns() : 0;
  int64_t start = clock.now_ns();
  StreamOptions so;
  so.pcr = options.pcr;
  so.bank = options.bank;
  so.checkpoint_every = options.checkpoint_every;
  so.protection = options.protection;
  TPMSEC_ASSIGN_OR_RETURN(auto stream, ExtendStream::open(t, options.strategy, so, &tpm.info));
  int64_t opened = clock.now_ns();
  run.open_ms = ms_between(start, opened);

  run.expected = run.initial;
  run.per_extend_ms.reserve(digests.size());
  run.extend_records.reserve(digests.size() + 1);
  for (size_t i = 0; i < digests.size(); ++i) {
    if (options.stop && options.stop->load()) {
      run.interrupted = true;
      break;
    }
    run.extend_records.push_back(tpm.log.size());
    int64_t before = clock.now_ns();
    Status s = stream->extend(digests[i]);
    int64_t after = clock.now_ns();
    if (!s.ok()) {
      return Error(s.error().kind(), fmt::format("extend {} of {}: {}", i + 1, digests.size(), s.error().message()),
                   s.error().tpm_rc());
    }
    run.per_extend_ms.push_back(ms_between(before, after));
    TPMSEC_ASSIGN_OR_RETURN(run.expected, pcr_extended_value(options.bank, run.expected, digests[i]));
    ++run.extends;
    if (options.progress && (i % 64 == 0 || i + 1 == digests.size())) options.progress(i + 1, digests.size());
  }
  run.extend_records.push_back(tpm.log.size());
  int64_t finishing = clock.now_ns();
  TPMSEC_RETURN_IF_ERROR(stream->finish());
  int64_t finished = clock.now_ns();
  run.finish_ms = ms_between(finishing, finished);
  run.total_ms = ms_between(start, finished);
  run.stats = stream->stats();
  stream.reset();
  run.records_end = tpm.log.size();
  run.tpm_commands = run.records_end - run.records_begin;
  if (tpm.latency) {
    run.tpm_ms = static_cast<double>(tpm.latency->modelled_ns() - modelled_before) / 1e6;
  } else {
    for (size_t i = run.records_begin; i < run.records_end; ++i) run.tpm_ms += tpm.log.records()[i].duration_ns / 1e6;
  }

  TPMSEC_ASSIGN_OR_RETURN(run.actual, pcr_read(t, options.bank, options.pcr));
  run.verified = run.actual == run.expected;
  run.per_extend = summarize(run.per_extend_ms);
  return run;
}

PricedRun price_run(const ReplayRun& run, const TraceLog& log, const LatencyProfile& profile,
                    size_t model_from_record) {
  LatencyModel model(profile);
  const auto& records = log.records();
  std::vector<double> ms(records.size(), 0.0);
  for (size_t i = model_from_record; i < run.records_end && i < records.size(); ++i) {
    ms[i] = model.latency_ms(records[i].shape);
  }
  PricedRun priced;
  for (size_t i = run.records_begin; i < run.records_end && i < records.size(); ++i) priced.total_ms += ms[i];
  std::vector<double> per_extend;
  per_extend.reserve(run.extends);
  for (size_t e = 0; e + 1 < run.extend_records.size(); ++e) {
    double sum = 0;
    for (size_t i = run.extend_records[e]; i < run.extend_records[e + 1]; ++i) sum += ms[i];
    per_extend.push_back(sum);
  }
  priced.per_extend = summarize(std::move(per_extend));
  return priced;
}

nlohmann::json to_json(const ReplayRun& run) {
  return {{"strategy", strategy_name(run.strategy)},
          {"pcr", run.pcr},
          {"bank", hash_name(run.bank)},
          {"extends", run.extends},
          {"total_ms", run.total_ms},
          {"tpm_ms", run.tpm_ms},
          {"open_ms", run.open_ms},
          {"finish_ms", run.finish_ms},
          {"per_extend_ms", to_json(run.per_extend)},
          {"tpm_commands", run.tpm_commands},
          {"initial", to_hex(run.initial)},
          {"expected", to_hex(run.expected)},
          {"actual", to_hex(run.actual)},
          {"verified", run.verified},
          {"interrupted", run.interrupted}};
}

StrategyMetrics replay_metrics(StrategyKind kind, const std::vector<ReplayRun>& runs) {
  std::vector<double> per_extend;
  size_t commands = 0;
  for (const ReplayRun& r : runs) {
    per_extend.insert(per_extend.end(), r.per_extend_ms.begin(), r.per_extend_ms.end());
    commands += r.tpm_commands;
  }
  return StrategyMetrics{std::string(strategy_name(kind)), summarize(per_extend),
                         per_extend.empty() ? 0.0 : double(commands) / double(per_extend.size())};
}

}  // namespace tpmsec
