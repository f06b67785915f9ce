// An SVG chart: median cost per extend by strategy, stacked by TPM command
// (the representative steady-state extend), host time on top.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tpmsec/measure/bench.h"
#include "tpmsec/measure/svg.h"

namespace tpmsec {
std::string bench_svg(const BenchResult& r) {
  struct Bar {
    std::string name;
    std::vector<std::pair<std::string, double>> parts;  // label, ms
    double total = 0;
  };
  std::vector<Bar> bars;
  std::map<std::string, int> colors;
  for (const auto& s : r.strategies) {
    Bar b{std::string(strategy_name(s.kind)), {}, 0};
    const Sample* rep = representative_extend(s);
    if (!rep) continue;
    for (const auto& c : rep->commands) {
      std::string label = command_label(c.shape);
      b.parts.push_back({label, static_cast<double>(c.duration_ns) / 1e6});
      if (!colors.count(label)) colors[label] = static_cast<int>(colors.size());
    }
    b.parts.push_back({"host", rep->host_ms});
    if (!colors.count("host")) colors["host"] = static_cast<int>(colors.size());
    b.total = rep->total_ms;
    bars.push_back(std::move(b));
  }
  double max_total = 0;
  for (const auto& b : bars) max_total = std::max(max_total, b.total);
  if (max_total <= 0) max_total = 1;

  const int left = 120, top = 50, bar_h = 28, gap = 14, width = 900, plot_w = 560;
  int height = top + static_cast<int>(bars.size()) * (bar_h + gap) + 40 + 18 * static_cast<int>(colors.size());
  std::string out = svg::begin(width, height);
  std::string title = fmt::format("Cost per protected PCR extend, ms ({}{}{})", r.tpm.value("manufacturer", ""),
                                  r.tpm.value("vendor", "").empty() ? "" : " " + r.tpm.value("vendor", ""),
                                  r.tpm.value("emulated", false) ? ", emulated" : "");
  out += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", left,
                     svg::escape(title));
  int y = top;
  for (const auto& b : bars) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8, y + bar_h / 2 + 4,
                       svg::escape(b.name));
    double x = left;
    for (const auto& [label, ms] : b.parts) {
      double w = ms / max_total * plot_w;
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{}: {:.3f} "
          "ms</title></rect>\n",
          x, y, std::max(w, 0.0), bar_h, svg::color(static_cast<size_t>(colors[label])), svg::escape(label), ms);
      x += w;
    }
    out += fmt::format("<text x=\"{:.2f}\" y=\"{}\">{:.3f} ms</text>\n", x + 6, y + bar_h / 2 + 4, b.total);
    y += bar_h + gap;
  }
  y += 10;
  for (const auto& [label, index] : colors) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>", left, y,
                       svg::color(static_cast<size_t>(index)));
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + 18, y + 10, svg::escape(label));
    y += 18;
  }
  out += svg::end();
  return out;
}

}  // namespace tpmsec
