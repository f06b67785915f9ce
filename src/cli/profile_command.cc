// tpmsec profile from-bench RESULT.json [-o PROFILE.json]
// tpmsec profile from-algtest DIR... [--name N] [--id ID] [--keep PROFILE] [-o PROFILE.json]
#include <fmt/format.h>

#include <filesystem>

#include "cli.h"
#include "tpmsec/emulation/algtest_import.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/profile_summary.h"
#include "tpmsec/measure/profile_from_bench.h"

namespace tpmsec::cli {
namespace {

struct FromBenchFlags {
  std::string input;
  std::string output;
  std::string id;
};

// `profile from-bench`: a bench result's medians as a profile.
Status run_from_bench(const FromBenchFlags& o) {
  TPMSEC_RETURN_IF_ERROR(check_outputs({o.output}));
  TPMSEC_ASSIGN_OR_RETURN(nlohmann::json bench, read_json_file(o.input));
  warn_if_interrupted(bench, o.input);
  std::string id = o.id;
  if (id.empty()) id = o.output.empty() ? "measured" : std::filesystem::path(o.output).stem().string();
  TPMSEC_ASSIGN_OR_RETURN(LatencyProfile profile, profile_from_bench(bench, id, o.input));
  std::string out = to_json(profile).dump(2) + "\n";
  if (o.output.empty()) {
    fmt::print("{}", out);
    return ok_status();
  }
  TPMSEC_RETURN_IF_ERROR(write_file(o.output, out));
  fmt::print(stderr, "tpmsec: wrote profile '{}' to {} (use --emulate {})\n", id, o.output, o.output);
  return ok_status();
}

void add_from_bench(CLI::App* profile, Action* action) {
  auto o = std::make_shared<FromBenchFlags>();
  CLI::App* sub = profile->add_subcommand(
      "from-bench", "Turn a real TPM's `tpmsec bench --json` result into a profile anyone can --emulate");
  sub->add_option("RESULT", o->input, "A bench result (tpmsec bench --json FILE)")->required();
  sub->add_option("-o,--output", o->output, "Write the profile here (default: standard output)");
  sub->add_option("--id", o->id, "Profile id (default: the output file name without .json, or 'measured')");
  sub->callback([o, action] { *action = [o]() { return run_from_bench(*o); }; });
}

struct FromAlgtestFlags {
  std::vector<std::string> dirs;
  std::string output;
  std::string id;
  std::string name;
  std::string source;
  std::string keep;
};

Result<AlgtestImportOptions> algtest_import_options(const FromAlgtestFlags& a) {
  AlgtestImportOptions options;
  options.id = a.id;
  if (options.id.empty()) {
    options.id = a.output.empty() ? "algtest" : std::filesystem::path(a.output).stem().string();
  }
  options.name = a.name;
  options.source = a.source;
  if (!a.keep.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(LatencyProfile keep, as_input(load_profile(a.keep)));
    options.keep = std::move(keep);
  }
  return options;
}

// `profile from-algtest`: the runs of one chip merged into a profile.
Status run_from_algtest(const FromAlgtestFlags& a) {
  TPMSEC_RETURN_IF_ERROR(check_outputs({a.output}));
  std::vector<AlgtestRun> runs;
  for (const std::string& dir : a.dirs) {
    TPMSEC_ASSIGN_OR_RETURN(AlgtestRun run, as_input(read_algtest_run(dir)));
    runs.push_back(std::move(run));
  }
  TPMSEC_ASSIGN_OR_RETURN(AlgtestImportOptions options, algtest_import_options(a));
  TPMSEC_ASSIGN_OR_RETURN(AlgtestImport imported, as_input(profile_from_algtest(runs, options)));
  for (const std::string& e : imported.excluded) fmt::print(stderr, "tpmsec: excluded {}\n", e);
  std::string out = to_json(imported.profile).dump(2) + "\n";
  if (a.output.empty()) {
    fmt::print("{}", out);
    return ok_status();
  }
  TPMSEC_RETURN_IF_ERROR(write_file(a.output, out));
  ProfileSummary s = summarize(imported.profile);
  fmt::print(stderr, "tpmsec: wrote profile '{}' to {} from {} run(s), {} excluded; {:.0f}% of {} values M or D\n",
             options.id, a.output, imported.used.size(), imported.excluded.size(), 100.0 * s.measured_fraction(),
             s.values);
  return ok_status();
}

void add_from_algtest(CLI::App* profile, Action* action) {
  auto a = std::make_shared<FromAlgtestFlags>();
  CLI::App* alg = profile->add_subcommand(
      "from-algtest",
      "Turn tpm2-algtest result directories (e.g. TPMScan runs) of one chip into a profile (docs/latency-profiles.md)");
  alg->add_option("DIR", a->dirs, "tpm2-algtest result directories (performance.yaml, detail/) of one chip")
      ->required();
  alg->add_option("-o,--output", a->output, "Write the profile here (default: standard output)");
  alg->add_option("--id", a->id, "Profile id (default: the output file name without .json, or 'algtest')");
  alg->add_option("--name", a->name, "Display name (default: manufacturer and vendor string)");
  alg->add_option("--source", a->source, "Cited in every value before the run paths (default: tpm2-algtest)");
  alg->add_option("--keep", a->keep,
                  "An earlier profile of the chip whose M values (and D values over non-M imports) are kept");
  alg->callback([a, action] { *action = [a]() { return run_from_algtest(*a); }; });
}

}  // namespace

void register_profile(CLI::App& app, Action* action) {
  CLI::App* profile = app.add_subcommand("profile", "Make latency profiles from measurements");
  profile->require_subcommand(1);
  add_from_bench(profile, action);
  add_from_algtest(profile, action);
}

}  // namespace tpmsec::cli
