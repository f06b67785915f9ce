// An SVG chart: median cost per extend by strategy, stacked by TPM command
// (the representative steady-state extend), host time on top.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tpmsec/bench.h"

namespace tpmsec {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

}  // namespace

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
    // The representative (closest-to-median) steady-state extend.
    const Sample* rep = nullptr;
    for (size_t i = 1; i < s.extends.size(); ++i) {
      if (!rep || std::fabs(s.extends[i].total_ms - s.per_extend_ms.median) <
                      std::fabs(rep->total_ms - s.per_extend_ms.median)) {
        rep = &s.extends[i];
      }
    }
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
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  std::string title = fmt::format("Cost per protected PCR extend, ms ({}{}{})", r.tpm.value("manufacturer", ""),
                                  r.tpm.value("vendor", "").empty() ? "" : " " + r.tpm.value("vendor", ""),
                                  r.tpm.value("emulated", false) ? ", emulated" : "");
  out += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", left,
                     escape(title));
  int y = top;
  for (const auto& b : bars) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8, y + bar_h / 2 + 4,
                       escape(b.name));
    double x = left;
    for (const auto& [label, ms] : b.parts) {
      double w = ms / max_total * plot_w;
      out += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\"><title>{}: {:.3f} ms</title></rect>\n",
          x, y, std::max(w, 0.0), bar_h, kPalette[colors[label] % 10], escape(label), ms);
      x += w;
    }
    out += fmt::format("<text x=\"{:.2f}\" y=\"{}\">{:.3f} ms</text>\n", x + 6, y + bar_h / 2 + 4, b.total);
    y += bar_h + gap;
  }
  y += 10;
  for (const auto& [label, index] : colors) {
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>", left, y,
                       kPalette[index % 10]);
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + 18, y + 10, escape(label));
    y += 18;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace tpmsec
