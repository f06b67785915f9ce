// The comparison as an SVG grouped bar chart: a group per strategy (per
// command when the results hold no strategy), a bar per result at the median,
// a whisker to the p99.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tpmsec/measure/compare.h"
#include "tpmsec/measure/svg.h"

namespace tpmsec {
namespace {

struct Group {
  std::string name;
  std::vector<const Distribution*> bars;  // per column; nullptr: not in that result
};

std::vector<Group> groups_of(const Comparison& c) {
  std::vector<Group> groups;
  for (const auto& name : c.strategies) {
    Group g{name, {}};
    for (const auto& col : c.columns) {
      auto it = col.strategies.find(name);
      g.bars.push_back(it != col.strategies.end() && it->second.per_extend_ms.n > 0 ? &it->second.per_extend_ms
                                                                                    : nullptr);
    }
    groups.push_back(std::move(g));
  }
  if (!groups.empty()) return groups;
  for (const auto& name : c.commands) {
    Group g{name, {}};
    for (const auto& col : c.columns) {
      const Distribution* d = nullptr;
      for (const auto& [n, dist] : col.commands) {
        if (n == name) d = &dist;
      }
      g.bars.push_back(d);
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

// A round axis maximum at or above `v`: 1, 2 or 5 times a power of ten.
double nice_ceiling(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::string compare_svg(const Comparison& c) {
  std::vector<Group> groups = groups_of(c);
  bool by_strategy = !c.strategies.empty();
  double max_value = 0;
  for (const auto& g : groups) {
    for (const Distribution* d : g.bars) {
      if (d) max_value = std::max({max_value, d->median, d->p99});
    }
  }
  double axis_max = nice_ceiling(max_value);

  const int left = 70, top = 50, plot_h = 300, bar_w = 26, group_gap = 36, legend_row = 18;
  const int columns = static_cast<int>(c.columns.size());
  const int group_w = std::max(1, columns) * bar_w + group_gap;
  const int plot_w = std::max(300, static_cast<int>(groups.size()) * group_w);
  const int width = left + plot_w + 40;
  const int height = top + plot_h + 60 + legend_row * columns + 20;
  std::string out = svg::begin(width, height);
  std::string title = by_strategy ? "Cost per PCR extend by strategy, ms (bar: median, whisker: p99)"
                                  : "TPM time per command, ms (bar: median, whisker: p99)";
  out += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", left,
                     svg::escape(title));
  auto y_of = [&](double v) { return top + plot_h - std::clamp(v / axis_max, 0.0, 1.0) * plot_h; };
  // Axis with five gridlines.
  for (int i = 0; i <= 4; ++i) {
    double v = axis_max * i / 4;
    double y = y_of(v);
    out += fmt::format("<line x1=\"{}\" y1=\"{:.2f}\" x2=\"{}\" y2=\"{:.2f}\" stroke=\"#dddddd\"/>\n", left, y,
                       left + plot_w, y);
    out += fmt::format("<text x=\"{}\" y=\"{:.2f}\" text-anchor=\"end\">{:g}</text>\n", left - 6, y + 4, v);
  }
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", left, top + plot_h,
                     left + plot_w, top + plot_h);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& g = groups[gi];
    int x0 = left + static_cast<int>(gi) * group_w + group_gap / 2;
    for (size_t ci = 0; ci < g.bars.size(); ++ci) {
      const Distribution* d = g.bars[ci];
      if (!d) continue;
      int x = x0 + static_cast<int>(ci) * bar_w;
      double y = y_of(d->median);
      out += fmt::format(
          "<rect x=\"{}\" y=\"{:.2f}\" width=\"{}\" height=\"{:.2f}\" fill=\"{}\"><title>{} — {}: median {:.3f} ms, "
          "p99 {:.3f} ms</title></rect>\n",
          x + 1, y, bar_w - 2, top + plot_h - y, svg::color(ci), svg::escape(g.name),
          svg::escape(c.columns[ci].tpm + " (" + c.columns[ci].source + ")"), d->median, d->p99);
      double yp = y_of(d->p99);
      double cx = x + bar_w / 2.0;
      out += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"black\"/>\n", cx, y,
                         cx, yp);
      out += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"black\"/>\n", cx - 4,
                         yp, cx + 4, yp);
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x0 + columns * bar_w / 2,
                       top + plot_h + 18, svg::escape(g.name));
  }
  int y = top + plot_h + 44;
  for (size_t ci = 0; ci < c.columns.size(); ++ci) {
    const auto& col = c.columns[ci];
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>", left, y, svg::color(ci));
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + 18, y + 10,
                       svg::escape(fmt::format("{} — {} ({})", col.tpm, col.source, col.origin)));
    y += legend_row;
  }
  out += svg::end();
  return out;
}

}  // namespace tpmsec
