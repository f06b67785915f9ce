// tpmsec profile from-bench RESULT.json [-o PROFILE.json]
#include <fmt/format.h>

#include <filesystem>

#include "cli.h"
#include "tpmsec/profile_from_bench.h"

namespace tpmsec::cli {

void register_profile(CLI::App& app, Action* action) {
  struct Options {
    std::string input;
    std::string output;
    std::string id;
  };
  auto o = std::make_shared<Options>();
  CLI::App* profile = app.add_subcommand("profile", "Make latency profiles from measurements");
  profile->require_subcommand(1);
  CLI::App* sub = profile->add_subcommand(
      "from-bench", "Turn a real TPM's `tpmsec bench --json` result into a profile anyone can --emulate");
  sub->add_option("RESULT", o->input, "A bench result (tpmsec bench --json FILE)")->required();
  sub->add_option("-o,--output", o->output, "Write the profile here (default: standard output)");
  sub->add_option("--id", o->id, "Profile id (default: the output file name without .json, or 'measured')");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->output}));
      TPMSEC_ASSIGN_OR_RETURN(nlohmann::json bench, read_json_file(o->input));
      std::string id = o->id;
      if (id.empty()) id = o->output.empty() ? "measured" : std::filesystem::path(o->output).stem().string();
      TPMSEC_ASSIGN_OR_RETURN(LatencyProfile profile, profile_from_bench(bench, id, o->input));
      std::string out = to_json(profile).dump(2) + "\n";
      if (o->output.empty()) {
        fmt::print("{}", out);
        return ok_status();
      }
      TPMSEC_RETURN_IF_ERROR(write_file(o->output, out));
      fmt::print(stderr, "tpmsec: wrote profile '{}' to {} (use --emulate {})\n", id, o->output, o->output);
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
