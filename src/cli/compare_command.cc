// tpmsec compare RESULT.json... [--svg FILE] [--markdown]
#include <fmt/format.h>

#include "cli.h"
#include "tpmsec/measure/compare.h"

namespace tpmsec::cli {

void register_compare(CLI::App& app, Action* action) {
  struct Options {
    std::vector<std::string> inputs;
    std::string svg;
    bool markdown = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Bench results from different TPMs or machines side by side (bench --json, trace import --json)");
  sub->add_option("RESULT", o->inputs, "Bench results (tpmsec-bench/1 JSON)")->required();
  sub->add_option("--svg", o->svg, "Also write a grouped bar chart of the cost per extend by strategy");
  sub->add_flag("--markdown", o->markdown, "Print a GitHub markdown table instead of plain text");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->svg}));
      // Every input is read and checked before anything is written.
      std::vector<CompareColumn> columns;
      for (const auto& path : o->inputs) {
        TPMSEC_ASSIGN_OR_RETURN(nlohmann::json bench, read_json_file(path));
        warn_if_interrupted(bench, path);
        TPMSEC_ASSIGN_OR_RETURN(CompareColumn column, compare_column(bench, path));
        columns.push_back(std::move(column));
      }
      Comparison comparison = compare_columns(std::move(columns));
      if (!o->svg.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o->svg, compare_svg(comparison)));
      fmt::print(report_stream({o->svg}), "{}", o->markdown ? compare_markdown(comparison) : compare_text(comparison));
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
