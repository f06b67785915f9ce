// tpmsec predict --ima FILE: added boot time per TPM profile and strategy.
#include <fmt/format.h>

#include <sstream>

#include "cli.h"
#include "log_input.h"
#include "progress.h"
#include "strategy_option.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/replay/predict.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec::cli {

void register_predict(CLI::App& app, Action* action) {
  struct Options {
    std::string ima;
    std::string profiles = "all";
    std::string strategies = "all";
    std::string svg, json;
    std::string tpm = "embedded";
    uint32_t pcr = 16;
    bool skip_bad = false;
    ProgressFlags progress;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "predict",
      "Predict the boot time an IMA log's extends add on each profiled TPM under each strategy (replayed "
      "on the embedded TPM, priced by each profile's latency model on a virtual clock)");
  sub->add_option("--ima", o->ima, "IMA log (ascii or binary runtime measurements)")->required();
  sub->add_option("--profiles", o->profiles, "all, or comma-separated profile names or paths")->capture_default_str();
  sub->add_option("--strategies", o->strategies, "all, or comma-separated strategy names")->capture_default_str();
  sub->add_option("--svg", o->svg, "Write a chart of TPM time per profile and strategy");
  sub->add_option("--json", o->json, "Write the table as JSON (schema tpmsec-predict/1)");
  sub->add_option("--tpm", o->tpm, "TPM to replay on (default: embedded; a real TPM works but takes its own time)")
      ->capture_default_str();
  sub->add_option("--pcr", o->pcr, "Resettable PCR to replay into")
      ->check(CLI::IsMember({16, 23}))
      ->capture_default_str();
  sub->add_flag("--skip-bad", o->skip_bad, "Leave out malformed log entries instead of stopping at the first");
  o->progress.add_to(sub);
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->json, o->svg}));
      PredictOptions options;
      TPMSEC_ASSIGN_OR_RETURN(options.strategies, parse_strategy_list(o->strategies));
      TPMSEC_ASSIGN_OR_RETURN(options.profiles, as_input(load_profiles(o->profiles)));
      TPMSEC_ASSIGN_OR_RETURN(ImaWorkload loaded, load_ima_workload(o->ima, alg::kSha256, o->skip_bad, false));
      const ImaWorkload* workload = &loaded;
      for (const ima::Problem& p : workload->problems) {
        fmt::print(stderr, "tpmsec: {}: {} (skipped)\n", o->ima, p.error.message());
      }
      options.workload = fmt::format("IMA log {}, {} entries", o->ima, workload->digests.size());
      options.replay.pcr = o->pcr;
      ProgressBar bar(o->progress.enabled());
      options.replay.progress = [&bar](size_t done, size_t total) { bar.update(done, total, "replaying"); };
      StopOnInterrupt interrupt;
      options.replay.stop = interrupt.flag();
      TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> base, open_transport(o->tpm));
      TPMSEC_ASSIGN_OR_RETURN(Prediction p, predict(*base, workload->digests, options));
      bar.finish();
      if (!o->json.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o->json, predict_json(p).dump(2) + "\n"));
      if (!o->svg.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o->svg, predict_svg(p)));
      fmt::print(report_stream({o->json, o->svg}), "{}", predict_text(p));
      if (p.interrupted) return runtime_error("interrupted: the figures above cover only the extends done");
      if (!p.verified) return integrity_error("a replay left the PCR at a value the log does not give");
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
