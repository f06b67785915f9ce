// tpmsec replay --ima FILE | --eventlog FILE: real measurement logs through a strategy.
#include <fmt/format.h>

#include <algorithm>

#include "cli.h"
#include "log_input.h"
#include "progress.h"
#include "protection_options.h"
#include "strategy_option.h"
#include "tpmsec/calibration/calibration.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/measure/openmetrics.h"
#include "tpmsec/pcr.h"
#include "tpmsec/replay/event_log.h"
#include "tpmsec/replay/replay.h"

namespace tpmsec::cli {
namespace {

struct ReplayCliOptions {
  TpmOption tpm;
  StrategyOption strategy;
  ProtectionOptions protection;
  std::string ima;
  std::string eventlog;
  uint32_t pcr = 16;
  bool force_pcr = false;
  std::string bank = "sha256";
  bool skip_bad = false;
  bool strict = false;
  uint32_t checkpoint_every = 100;
  std::string json;
  std::string openmetrics;
  ProgressFlags progress;
};

// --openmetrics: the runs as one strategy's metrics (replay_metrics()).
Status write_openmetrics(const ReplayCliOptions& o, const MeasuredTpm& tpm, StrategyKind kind,
                         const std::vector<ReplayRun>& runs, bool complete) {
  if (o.openmetrics.empty()) return ok_status();
  StrategyMetrics m = replay_metrics(kind, runs);
  return write_file(o.openmetrics, openmetrics_text(tpm.identity, tpm.base->describe(), "replay", {m}, complete));
}

std::string describe_run(const ReplayRun& run, const MeasuredTpm& tpm) {
  std::string out;
  const Distribution& d = run.per_extend;
  out += fmt::format(
      "{:<13}{} in {:.2f} s{}; per extend median {:.3f} ms, mean {:.3f}, p90 {:.3f}, p99 {:.3f}, max {:.3f}\n",
      "extends", run.extends, run.total_ms / 1000, tpm.clock->is_virtual() ? " (virtual clock)" : "", d.median, d.mean,
      d.p90, d.p99, d.max);
  out += fmt::format("{:<13}{} ({:.2f} per extend); stream set-up {:.2f} ms, tear-down {:.2f} ms\n", "TPM commands",
                     run.tpm_commands, run.extends ? double(run.tpm_commands) / double(run.extends) : 0.0, run.open_ms,
                     run.finish_ms);
  if (run.stats.rebuilds || run.stats.checkpoints || run.stats.landed_checks) {
    out += fmt::format("{:<13}{} session rebuilds, {} checkpoints, {} landed checks\n", "stream", run.stats.rebuilds,
                       run.stats.checkpoints, run.stats.landed_checks);
  }
  return out;
}

Status check_target_pcr(const ReplayCliOptions& o) {
  if (pcr_resettable(o.pcr) || o.force_pcr) return ok_status();
  if (o.pcr == 10) {
    return usage_error(
        "PCR 10 holds this machine's IMA measurements and cannot be reset: replay into 16 (the default) "
        "or 23, or give --force-pcr to extend PCR 10 for real");
  }
  return usage_error(
      fmt::format("PCR {} cannot be reset: replay into 16 (the default) or 23, or give --force-pcr", o.pcr));
}

// The TPM, measured, under the protect path (open_measured_protected) for
// the request the options make.
Result<MeasuredProtectedTpm> open_replay_tpm(const ReplayCliOptions& o) {
  TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o.protection.request());
  TPMSEC_RETURN_IF_ERROR(o.strategy.apply_to(request, o.protection.items_origin()));
  return open_measured_protected(o.tpm, std::move(request));
}

// The strategy for the replay's extends and the protection of its sessions,
// decided by the protect path (protect.h) on the measured TPM.
Result<std::pair<StrategyKind, ProtectionConfig>> plan(ProtectedTpm& protect) {
  TPMSEC_ASSIGN_OR_RETURN(ExtendPlan plan, protect.plan_extends());
  ProtectionConfig protection = protect.protection();
  protection.null_key_load = plan.tuning.null_key;
  return std::make_pair(plan.strategy, std::move(protection));
}

Status replay_ima(const ReplayCliOptions& o, uint16_t bank) {
  TPMSEC_ASSIGN_OR_RETURN(ImaWorkload loaded, load_ima_workload(o.ima, bank, o.skip_bad, o.strict));
  const ImaWorkload* workload = &loaded;
  for (const ima::Problem& p : workload->problems) {
    if (o.skip_bad) fmt::print(stderr, "tpmsec: {}: {} (skipped)\n", o.ima, p.error.message());
  }
  TPMSEC_ASSIGN_OR_RETURN(MeasuredProtectedTpm opened, open_replay_tpm(o));
  MeasuredTpm* tpm = opened.measured.get();
  TPMSEC_RETURN_IF_ERROR(check_pcr(tpm->info, bank, o.pcr));
  ReplayOptions ro;
  TPMSEC_ASSIGN_OR_RETURN(auto planned, plan(*opened.protect));
  const StrategyKind kind = planned.first;
  ro.strategy = kind;
  ro.protection = std::move(planned.second);
  ro.pcr = o.pcr;
  ro.bank = bank;
  ro.checkpoint_every = o.checkpoint_every;
  ro.reset_first = pcr_resettable(o.pcr);
  ProgressBar bar(o.progress.enabled(), tpm->clock);
  ro.progress = [&bar](size_t done, size_t total) { bar.update(done, total, "extending"); };
  StopOnInterrupt interrupt;
  ro.stop = interrupt.flag();
  TPMSEC_ASSIGN_OR_RETURN(ReplayRun run, replay_digests(*tpm, workload->digests, ro));
  bar.finish();

  std::vector<std::string> templates;
  for (const auto& [name, n] : workload->templates) templates.push_back(fmt::format("{} {}", name, n));
  fmt::print(report_stream({o.json, o.openmetrics}),
             "{:<13}{}: {} IMA log, {} good entries, {} rejected; replayed {} ({}), {} violations\n", "log", o.ima,
             workload->format == ima::LogFormat::kAscii ? "ascii" : "binary", workload->entries,
             workload->problems.size(),
             run.interrupted ? fmt::format("{} of {}, INTERRUPTED", run.extends, workload->digests.size())
                             : fmt::format("{}", run.extends),
             fmt::join(templates, ", "), workload->violations);
  fmt::print(report_stream({o.json, o.openmetrics}), "{:<13}{} {} firmware {}{}\n", "TPM",
             tpm->identity.value("manufacturer", ""), tpm->identity.value("vendor", ""),
             tpm->identity.value("firmware_version", ""),
             tpm->profile.empty() ? "" : fmt::format(" (emulated: profile {})", tpm->profile));
  fmt::print(report_stream({o.json, o.openmetrics}), "{:<13}{} ({}){}\n", "strategy", strategy_name(kind),
             strategy_protection(kind),
             o.strategy.strategy.empty() ? ", chosen by the policy (-v says which rule)" : "");
  fmt::print(report_stream({o.json, o.openmetrics}), "{:<13}{} {}, {}\n", "PCR", o.pcr, hash_name(bank),
             ro.reset_first ? "reset before the replay" : "extended from its current value (--force-pcr)");
  fmt::print(report_stream({o.json, o.openmetrics}), "{}", describe_run(run, *tpm));
  fmt::print(
      report_stream({o.json, o.openmetrics}), "{:<13}PCR {} = {}: {}\n", "result", o.pcr, to_hex(run.actual),
      run.verified ? "equal to the value computed from the log" : "DIFFERS from the value computed from the log");
  if (!o.json.empty()) {
    nlohmann::json j = {{"schema", "tpmsec-replay/1"},
                        {"log",
                         {{"path", o.ima},
                          {"kind", "ima"},
                          {"entries", workload->entries},
                          {"rejected", workload->problems.size()},
                          {"violations", workload->violations}}},
                        {"tpm", tpm->identity},
                        {"runs", nlohmann::json::array({to_json(run)})}};
    TPMSEC_RETURN_IF_ERROR(write_file(o.json, j.dump(2) + "\n"));
  }
  TPMSEC_RETURN_IF_ERROR(write_openmetrics(o, *tpm, kind, {run}, !run.interrupted));
  if (run.interrupted) return runtime_error(fmt::format("interrupted after {} extends", run.extends));
  if (!run.verified) {
    return integrity_error(
        fmt::format("PCR {} is {} but the log gives {}", o.pcr, to_hex(run.actual), to_hex(run.expected)));
  }
  return ok_status();
}

// Each PCR's value by the log; an unsupported bank names the log's banks that would work.
Result<std::map<uint32_t, Bytes>> log_values(const ReplayCliOptions& o, const event_log::EventLog& log, uint16_t bank) {
  auto computed = event_log::replay_event_log(log, bank);
  if (!computed.ok() && computed.error().kind() == ErrorKind::kUnsupported) {
    // Suggest only the banks that would work: in the log, hashable, not this one.
    std::vector<std::string> banks;
    for (uint16_t b : log.banks()) {
      if (b != bank && crypto::hash(b, {}).ok()) banks.emplace_back(hash_name(b));
    }
    if (banks.empty()) return usage_error(fmt::format("{}: {}", o.eventlog, computed.error().message()));
    return usage_error(fmt::format("{}: {} (give --bank {})", o.eventlog, computed.error().message(),
                                   fmt::join(banks, " or --bank ")));
  }
  if (!computed.ok()) {
    return input_file_error(
        Error(computed.error().kind(), fmt::format("{}: {}", o.eventlog, computed.error().message())));
  }
  return computed;
}

// The events of each PCR, in log order.
Result<std::map<uint32_t, std::vector<Bytes>>> digests_by_pcr(const ReplayCliOptions& o, const event_log::EventLog& log,
                                                              uint16_t bank) {
  std::map<uint32_t, std::vector<Bytes>> by_pcr;
  for (const event_log::Event& e : log.events) {
    if (e.event_type == event_log::kEvNoAction) continue;
    const Bytes* d = e.digest_for(bank);
    if (!d) return usage_error(fmt::format("{}: event {} has no {} digest", o.eventlog, e.index, hash_name(bank)));
    by_pcr[e.pcr].push_back(*d);
  }
  return by_pcr;
}

// The log's lines and the table's head.
void print_eventlog_head(const ReplayCliOptions& o, const event_log::EventLog& log, StrategyKind kind) {
  if (!log.spec_id_note.empty()) fmt::print(stderr, "tpmsec: note: {}: {}\n", o.eventlog, log.spec_id_note);
  fmt::print(
      report_stream({o.json, o.openmetrics}), "{:<13}{}: {}, {} events, banks {}\n", "log", o.eventlog,
      log.format == event_log::LogFormat::kSha1 ? "TCG SHA-1 event log (TCG_PCR_EVENT)" : "TCG crypto-agile event log",
      log.events.size(),
      fmt::join(
          [&] {
            std::vector<std::string> names;
            for (uint16_t b : log.banks()) names.emplace_back(hash_name(b));
            return names;
          }(),
          ", "));
  fmt::print(report_stream({o.json, o.openmetrics}),
             "{:<13}{} ({}); each PCR of the log goes in turn into 16 and 23 (reset first), alternating\n\n",
             "strategy", strategy_name(kind), strategy_protection(kind));
  fmt::print(report_stream({o.json, o.openmetrics}), "{:<6}{:<8}{:>8}{:>12}  {:<8}{}\n", "PCR", "into", "events", "ms",
             "log", "TPM value");
}

// One PCR's row: the replayed value against the log's, and the run as JSON.
struct PcrRow {
  bool match = false;  // the TPM reproduced the log's chain
  nlohmann::json json;
};

// The log's value. PCR 0 after an H-CRTM or a StartupLocality event
// starts from a locality, which a reset PCR 16/23 cannot: the TPM then
// reproduces the chain from zeros, which is not the log's value, so the
// row says "chain" (never "match") and shows the log's own value.
Result<PcrRow> report_pcr_row(const ReplayCliOptions& o, const event_log::EventLog& log, uint16_t bank, uint32_t source,
                              uint32_t into, const std::vector<Bytes>& digests, const ReplayRun& run,
                              const Bytes& from_log) {
  bool locality_start = source == 0 && log.pcr0_locality() != 0;
  Bytes from_zeros(from_log.size(), 0);
  for (const Bytes& d : digests) {
    TPMSEC_ASSIGN_OR_RETURN(from_zeros, pcr_extended_value(bank, from_zeros, d));
  }
  bool match = run.verified && run.actual == (locality_start ? from_zeros : from_log);
  fmt::print(report_stream({o.json, o.openmetrics}), "{:<6}{:<8}{:>8}{:>12.2f}  {:<8}{}\n", source, into,
             digests.size(), run.total_ms,
             !match           ? "DIFFERS"
             : locality_start ? "chain"
                              : "match",
             to_hex(run.actual));
  if (locality_start) {
    fmt::print(report_stream({o.json, o.openmetrics}),
               "{:<34}(the chain from zeros: PCR 0 starts from locality {}{}; the log's value is {})\n", "",
               log.pcr0_locality(), log.hcrtm ? " (H-CRTM)" : "", to_hex(from_log));
  }
  nlohmann::json j = to_json(run);
  j["source_pcr"] = source;
  j["log_value"] = to_hex(from_log);
  j["match"] = match && !locality_start;
  j["chain_match"] = match;
  return PcrRow{match, std::move(j)};
}

Status replay_eventlog(const ReplayCliOptions& o, uint16_t bank) {
  TPMSEC_ASSIGN_OR_RETURN(event_log::EventLog parsed, load_event_log(o.eventlog));
  const event_log::EventLog* log = &parsed;
  TPMSEC_ASSIGN_OR_RETURN(auto computed, log_values(o, *log, bank));
  TPMSEC_ASSIGN_OR_RETURN(auto by_pcr, digests_by_pcr(o, *log, bank));
  TPMSEC_ASSIGN_OR_RETURN(MeasuredProtectedTpm opened, open_replay_tpm(o));
  MeasuredTpm* tpm = opened.measured.get();
  TPMSEC_ASSIGN_OR_RETURN(auto planned, plan(*opened.protect));
  const StrategyKind kind = planned.first;
  ProtectionConfig& protection = planned.second;
  print_eventlog_head(o, *log, kind);
  std::vector<nlohmann::json> runs;
  std::vector<ReplayRun> done;
  bool all_match = true;
  size_t n = 0;
  StopOnInterrupt interrupt;
  for (const auto& [source, digests] : by_pcr) {
    ReplayOptions ro;
    ro.strategy = kind;
    ro.pcr = (n++ % 2 == 0) ? 16 : 23;
    ro.bank = bank;
    ro.checkpoint_every = o.checkpoint_every;
    ro.stop = interrupt.flag();
    ro.protection = protection;
    TPMSEC_ASSIGN_OR_RETURN(ReplayRun run, replay_digests(*tpm, digests, ro));
    done.push_back(run);
    if (run.interrupted) {
      TPMSEC_RETURN_IF_ERROR(write_openmetrics(o, *tpm, kind, done, false));
      return runtime_error("interrupted");
    }
    TPMSEC_ASSIGN_OR_RETURN(PcrRow row,
                            report_pcr_row(o, *log, bank, source, ro.pcr, digests, run, computed.at(source)));
    all_match &= row.match;
    runs.push_back(std::move(row.json));
  }
  if (!o.json.empty()) {
    nlohmann::json j = {{"schema", "tpmsec-replay/1"},
                        {"log", {{"path", o.eventlog}, {"kind", "eventlog"}, {"events", log->events.size()}}},
                        {"tpm", tpm->identity},
                        {"runs", runs}};
    TPMSEC_RETURN_IF_ERROR(write_file(o.json, j.dump(2) + "\n"));
  }
  TPMSEC_RETURN_IF_ERROR(write_openmetrics(o, *tpm, kind, done, true));
  if (!all_match) return integrity_error("a replayed PCR differs from the value the event log gives");
  return ok_status();
}

}  // namespace

void register_replay(CLI::App& app, Action* action) {
  auto o = std::make_shared<ReplayCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "replay",
      "Extend a real measurement log (IMA or firmware event log) through a strategy, time it, and check "
      "the PCR against the log");
  auto ima = sub->add_option("--ima", o->ima,
                             "IMA log: ascii_runtime_measurements or binary_runtime_measurements, or a per-bank list "
                             "(ascii_runtime_measurements_sha256, …: the template-hash bank from the name) (templates "
                             "ima, ima-ng, ima-ngv2, ima-sig, ima-sigv2, ima-buf, ima-modsig, evm-sig)");
  auto ev = sub->add_option("--eventlog", o->eventlog,
                            "TCG crypto-agile firmware event log (/sys/kernel/security/tpm0/binary_bios_measurements)");
  ima->excludes(ev);
  o->tpm.add_to(sub, /*state_changing=*/true);
  o->strategy.add_to(sub);
  o->tpm.applies.policy = true;
  o->protection.add_to(sub, o->tpm);
  sub->add_option("--pcr", o->pcr, "IMA: the PCR every entry is extended into (16 or 23; others need --force-pcr)")
      ->check(CLI::Range(0, 23))
      ->capture_default_str();
  sub->add_flag("--force-pcr", o->force_pcr, "Allow a PCR that cannot be reset, PCR 10 included (changes it for good)");
  sub->add_option("--bank", o->bank, "PCR bank (sha1, sha256, sha384, sha512, sm3_256)")->capture_default_str();
  sub->add_flag("--skip-bad", o->skip_bad, "IMA: leave out malformed entries (each is reported) instead of stopping");
  sub->add_flag("--strict", o->strict,
                "IMA: refuse a log that ends in a partial entry (by default the whole entries are replayed and the "
                "tail is named in a warning)");
  sub->add_option("--checkpoint-every", o->checkpoint_every, "checkpoint strategy: audited read every N extends")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  o->progress.add_to(sub);
  sub->add_option("--json", o->json, "Write the result as JSON");
  sub->add_option("--openmetrics", o->openmetrics,
                  "Write cost per extend in the Prometheus text format (node_exporter textfile collector)");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->json, o->openmetrics}));
      if (o->ima.empty() == o->eventlog.empty()) return usage_error("give one log: --ima FILE or --eventlog FILE");
      TPMSEC_ASSIGN_OR_RETURN(uint16_t bank, parse_bank(o->bank));
      if (!o->strategy.strategy.empty()) TPMSEC_RETURN_IF_ERROR(status_of(parse_strategy(o->strategy.strategy)));
      if (!o->ima.empty()) {
        TPMSEC_RETURN_IF_ERROR(check_target_pcr(*o));
        return replay_ima(*o, bank);
      }
      return replay_eventlog(*o, bank);
    };
  });
}

}  // namespace tpmsec::cli
