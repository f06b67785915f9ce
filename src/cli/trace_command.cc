// tpmsec trace import FILE... [--json OUT] [--label TEXT]
#include <fmt/format.h>

#include "cli.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/measure/ftrace_import.h"

namespace tpmsec::cli {

void register_trace(CLI::App& app, Action* action) {
  struct Options {
    std::vector<std::string> inputs;
    std::string json;
    std::string label;
    std::string manufacturer;
  };
  auto o = std::make_shared<Options>();
  CLI::App* trace = app.add_subcommand("trace", "Work with kernel traces of the TPM driver");
  trace->require_subcommand(1);
  CLI::App* sub = trace->add_subcommand(
      "import",
      "Turn ftrace function_graph captures of the Linux TPM driver (tpm2_pcr_extend, tpm_transmit_cmd) into a bench "
      "result: the same report as bench, and with --json a result for compare and profile from-bench");
  sub->add_option("FILE", o->inputs, "function_graph captures of the same TPM (cat /sys/kernel/tracing/trace)")
      ->required();
  sub->add_option("--json", o->json, "Write the result as JSON (docs/bench-json.md, clock \"ftrace\")");
  sub->add_option("--label", o->label, "What the TPM was, e.g. \"IFX SLB9670 fw 7.85\" (default: unknown TPM)");
  sub->add_option(
      "--manufacturer", o->manufacturer,
      "The TPM's manufacturer code as TPM_PT_MANUFACTURER (IFX, STM, NTC, ...): profile from-bench needs it");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->json}));
      std::vector<FtraceCapture> captures;
      for (const auto& path : o->inputs) {
        TPMSEC_ASSIGN_OR_RETURN(std::string text, read_file(path, kMaxLogBytes));
        auto capture = parse_function_graph(text, path);
        if (!capture.ok()) return usage_error(capture.error().message());
        captures.push_back(std::move(*capture));
      }
      FtraceImportOptions options;
      options.label = o->label;
      options.manufacturer = o->manufacturer;
      auto result = bench_from_ftrace(captures, options);
      if (!result.ok()) return usage_error(result.error().message());
      if (!o->json.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o->json, bench_json(*result).dump(2) + "\n"));
      fmt::print(report_stream({o->json}), "{}", bench_text(*result));
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
