#include "tpmsec/replay/predict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tpmsec/emulation/value_range.h"
#include "tpmsec/measure/svg.h"

namespace tpmsec {

Result<Prediction> predict(Transport& base, std::span<const Bytes> digests, const PredictOptions& options) {
  Prediction p;
  p.workload = options.workload;
  p.extends = digests.size();
  p.strategies = options.strategies.empty() ? all_strategies() : options.strategies;
  if (options.profiles.empty()) return usage_error("predict needs at least one profile");
  for (const LatencyProfile& profile : options.profiles) {
    p.profile_ids.push_back(profile.id);
    p.profile_names.push_back(profile.name);
  }
  // Plain is the baseline of "added"; run it even when not asked for.
  std::vector<StrategyKind> runs = p.strategies;
  if (std::find(runs.begin(), runs.end(), StrategyKind::kPlain) == runs.end()) runs.push_back(StrategyKind::kPlain);

  p.cells.assign(options.profiles.size(), std::vector<PredictCell>(p.strategies.size()));
  // Each profile at the low and high ends of its values' ranges, and its E
  // part alone (value_range.h): the same replay priced by each.
  std::vector<LatencyProfile> low, high, estimated;
  for (const LatencyProfile& profile : options.profiles) {
    low.push_back(profile_at(profile, RangeEnd::kLow));
    high.push_back(profile_at(profile, RangeEnd::kHigh));
    estimated.push_back(estimated_part(profile));
  }
  std::vector<double> plain_total(options.profiles.size(), 0.0);
  for (StrategyKind kind : runs) {
    TPMSEC_ASSIGN_OR_RETURN(auto tpm, measure_tpm(base, ""));
    ReplayOptions ro = options.replay;
    ro.strategy = kind;
    TPMSEC_ASSIGN_OR_RETURN(ReplayRun run, replay_digests(*tpm, digests, ro));
    p.verified &= run.verified;
    p.interrupted |= run.interrupted;
    auto column = std::find(p.strategies.begin(), p.strategies.end(), kind);
    if (column != p.strategies.end()) p.tpm_commands.push_back(run.tpm_commands);
    for (size_t i = 0; i < options.profiles.size(); ++i) {
      PricedRun priced = price_run(run, tpm->log, options.profiles[i], 0);
      if (kind == StrategyKind::kPlain) plain_total[i] = priced.total_ms;
      if (column != p.strategies.end()) {
        PredictCell& cell = p.cells[i][static_cast<size_t>(column - p.strategies.begin())];
        cell.total_ms = priced.total_ms;
        cell.per_extend = priced.per_extend;
        PricedRun at_low = price_run(run, tpm->log, low[i], 0);
        PricedRun at_high = price_run(run, tpm->log, high[i], 0);
        cell.total_low_ms = at_low.total_ms;
        cell.total_high_ms = at_high.total_ms;
        cell.per_extend_low_ms = at_low.per_extend.median;
        cell.per_extend_high_ms = at_high.per_extend.median;
        const double e = price_run(run, tpm->log, estimated[i], 0).per_extend.median;
        cell.estimated_share = priced.per_extend.median > 0 ? std::clamp(e / priced.per_extend.median, 0.0, 1.0) : 0.0;
      }
    }
    if (run.interrupted) break;
  }
  for (size_t i = 0; i < p.cells.size(); ++i) {
    for (PredictCell& cell : p.cells[i]) cell.added_ms = cell.total_ms - plain_total[i];
  }
  return p;
}

std::string predict_text(const Prediction& p) {
  std::string out = fmt::format(
      "Predicted TPM time for {} PCR extends ({}), in seconds; (+N) is the time\n"
      "added over plain extends on the same TPM. Priced by each profile's latency model.\n\n",
      p.extends, p.workload);
  // A profile x strategy table of `text(cell)`, columns `width` wide.
  auto table = [&](size_t width, auto text) {
    out += fmt::format("{:<14}", "PROFILE");
    for (StrategyKind k : p.strategies) out += fmt::format("{:>{}}", strategy_name(k), width);
    out += "\n";
    for (size_t i = 0; i < p.cells.size(); ++i) {
      out += fmt::format("{:<14}", p.profile_ids[i]);
      for (const PredictCell& cell : p.cells[i]) out += fmt::format("{:>{}}", text(cell), width);
      out += "\n";
    }
  };
  table(22, [](const PredictCell& cell) {
    std::string v = fmt::format("{:.1f}", cell.total_ms / 1000);
    if (std::abs(cell.added_ms) >= 50) v += fmt::format(" (+{:.1f})", cell.added_ms / 1000);
    return v;
  });
  out += "\nRange of the total (s, low-high), priced with every value at the low, then high end of its range:\n";
  table(22, [](const PredictCell& cell) {
    return fmt::format("{:.1f}-{:.1f}", cell.total_low_ms / 1000, cell.total_high_ms / 1000);
  });
  out += "\nPer extend (median ms, low-high; E: share of the steady-state cost from estimated values):\n";
  bool estimates = false;
  table(28, [&](const PredictCell& cell) {
    std::string v =
        fmt::format("{:.2f} ({:.1f}-{:.1f})", cell.per_extend.median, cell.per_extend_low_ms, cell.per_extend_high_ms);
    if (cell.estimated_share > 0) v += fmt::format(" {:.0f}%E", 100 * cell.estimated_share);
    estimates |= cell.estimated_share > 0;
    return v;
  });
  if (estimates) {
    out +=
        "Figures marked E rest partly on estimated values (tag E, not validated): `tpmsec profiles show PROFILE`\n"
        "lists them; ranges are explained in docs/latency-profiles.md, \"Uncertainty\".\n";
  }
  out += fmt::format("\nEvery replay left the PCR at the value computed from the log: {}\n", p.verified ? "yes" : "NO");
  if (p.interrupted) out += "Interrupted: the figures cover only the extends done.\n";
  return out;
}

nlohmann::json predict_json(const Prediction& p) {
  nlohmann::json j;
  j["schema"] = "tpmsec-predict/1";
  j["workload"] = p.workload;
  j["extends"] = p.extends;
  j["verified"] = p.verified;
  j["interrupted"] = p.interrupted;
  j["strategies"] = nlohmann::json::array();
  for (size_t s = 0; s < p.strategies.size(); ++s) {
    nlohmann::json e;
    e["name"] = strategy_name(p.strategies[s]);
    e["protection"] = strategy_protection(p.strategies[s]);
    if (s < p.tpm_commands.size()) e["tpm_commands"] = p.tpm_commands[s];
    j["strategies"].push_back(e);
  }
  j["profiles"] = nlohmann::json::array();
  for (size_t i = 0; i < p.cells.size(); ++i) {
    nlohmann::json prof;
    prof["id"] = p.profile_ids[i];
    prof["name"] = p.profile_names[i];
    prof["results"] = nlohmann::json::object();
    for (size_t s = 0; s < p.strategies.size(); ++s) {
      const PredictCell& c = p.cells[i][s];
      prof["results"][std::string(strategy_name(p.strategies[s]))] = {
          {"total_s", c.total_ms / 1000},
          {"total_s_low", c.total_low_ms / 1000},
          {"total_s_high", c.total_high_ms / 1000},
          {"added_s", c.added_ms / 1000},
          {"per_extend_ms", to_json(c.per_extend)},
          {"per_extend_ms_low", c.per_extend_low_ms},
          {"per_extend_ms_high", c.per_extend_high_ms},
          {"estimated_share", std::round(100.0 * c.estimated_share) / 100.0}};
    }
    j["profiles"].push_back(prof);
  }
  return j;
}

std::string predict_svg(const Prediction& p) {
  const int left = 120, top = 50, bar_h = 9, gap = 10, width = 900, right = 40;
  const int group_h = static_cast<int>(p.strategies.size()) * bar_h + gap;
  const int height = top + static_cast<int>(p.cells.size()) * group_h + 60;
  double max_s = 1e-9;
  for (const auto& row : p.cells)
    for (const auto& c : row) max_s = std::max(max_s, c.total_ms / 1000);
  const double scale = (width - left - right - 160) / max_s;
  std::string out = svg::begin(width, height);
  out += fmt::format("<text x=\"{}\" y=\"24\" font-family=\"sans-serif\" font-size=\"15\">{}</text>\n", left,
                     svg::escape(fmt::format("TPM time for {} PCR extends ({}), seconds", p.extends, p.workload)));
  for (size_t i = 0; i < p.cells.size(); ++i) {
    int y0 = top + static_cast<int>(i) * group_h;
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"11\" text-anchor=\"end\">{}</text>\n", left - 6,
        y0 + group_h / 2, svg::escape(p.profile_ids[i]));
    for (size_t s = 0; s < p.strategies.size(); ++s) {
      const PredictCell& c = p.cells[i][s];
      int y = y0 + static_cast<int>(s) * bar_h;
      int w = std::max(1, static_cast<int>(c.total_ms / 1000 * scale));
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n", left, y, w,
          bar_h - 1, svg::color(s),
          svg::escape(fmt::format("{} on {}: {:.1f} s (+{:.1f} s over plain)", strategy_name(p.strategies[s]),
                                  p.profile_ids[i], c.total_ms / 1000, c.added_ms / 1000)));
      out += fmt::format("<text x=\"{}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"8\">{:.1f}</text>\n",
                         left + w + 3, y + bar_h - 2, c.total_ms / 1000);
    }
  }
  int ly = height - 30;
  for (size_t s = 0; s < p.strategies.size(); ++s) {
    int x = left + static_cast<int>(s) * 130;
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", x, ly, svg::color(s));
    out += fmt::format("<text x=\"{}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"12\">{}</text>\n", x + 16,
                       ly + 11, svg::escape(std::string(strategy_name(p.strategies[s]))));
  }
  return out + svg::end();
}

}  // namespace tpmsec
