// The readable bench report and the function_graph breakdown.
#include <fmt/format.h>

#include <cmath>

#include "tpmsec/commands.h"
#include "tpmsec/measure/bench.h"

namespace tpmsec {
namespace {

// ftrace's duration markers: '$' > 1 s, '@' > 100 ms, '*' > 10 ms, '#' > 1 ms, '!' > 100 us, '+' > 10 us.
char marker(double us) {
  if (us > 1e6) return '$';
  if (us > 1e5) return '@';
  if (us > 1e4) return '*';
  if (us > 1e3) return '#';
  if (us > 100) return '!';
  if (us > 10) return '+';
  return ' ';
}

std::string graph_line(double us, int depth, const std::string& call) {
  return fmt::format(" {} {:>11.3f} us |  {}{}\n", marker(us), us, std::string(2 * depth, ' '), call);
}
std::string open_line(int depth, const std::string& call) {
  return fmt::format("   {:>11}    |  {}{} {{\n", "", std::string(2 * depth, ' '), call);
}

// Host time is "-" when not measured (an imported trace gives TPM time only).
std::string distribution_row(const std::string& name, const Distribution& d, const Distribution& host_us) {
  if (d.n == 0) return fmt::format("{:<32}{:>6}  not measured (the run stopped first)\n", name, 0);
  std::string host = host_us.n ? fmt::format("{:.1f}", host_us.median) : "-";
  return fmt::format("{:<32}{:>6}{:>11.5g}{:>11.5g}{:>11.5g}{:>11.5g}{:>11.5g}{:>11.5g}{:>10}\n", name, d.n, d.min,
                     d.median, d.mean, d.p90, d.p99, d.max, host);
}

}  // namespace

const Sample* representative_extend(const StrategyResult& s) {
  if (s.extends.empty()) return nullptr;
  size_t best = s.extends.size() > 1 ? 1 : 0;
  for (size_t i = best + 1; i < s.extends.size(); ++i) {
    if (std::fabs(s.extends[i].total_ms - s.per_extend_ms.median) <
        std::fabs(s.extends[best].total_ms - s.per_extend_ms.median)) {
      best = i;
    }
  }
  return &s.extends[best];
}

std::string clock_name(const BenchResult& r) {
  if (!r.clock.empty()) return r.clock;
  return r.virtual_clock ? "virtual" : "real";
}

std::string command_label(const CommandShape& c) {
  std::string name = command_name(c.command_code);
  switch (c.command_code) {
    case cmd::StartAuthSession::kInfo.code:
      if (!c.salted) return name + " (unsalted)";
      return name + (c.rsa_salt() ? " (RSA salt)" : " (ECC salt)");
    case cmd::ContextLoad::kInfo.code:
    case cmd::ContextSave::kInfo.code:
    case cmd::FlushContext::kInfo.code:
      return name + (c.session_context() ? " (session)" : " (object)");
    case cmd::PcrExtend::kInfo.code:
      return name + (c.hmac_session ? " (HMAC session)" : " (password)");
    case cmd::PcrRead::kInfo.code:
      return name + ((c.session_attributes & 0x80) ? " (audit session)" : "");
    default:
      return name;
  }
}

std::string function_graph(const StrategyResult& s) {
  const Sample* rep = representative_extend(s);
  if (!rep) return "";
  const Sample& sample = *rep;
  size_t index = static_cast<size_t>(rep - s.extends.data());
  std::string out = fmt::format("# {}: extend {} of {} ({}, closest to the median)\n", strategy_name(s.kind), index + 1,
                                s.extends.size(), index == 0 ? "the only one" : "steady state");
  out += "#    DURATION        FUNCTION CALLS\n#    |     |          |   |   |   |\n";
  out += open_line(0, "tpm2_pcr_extend()");
  int64_t cursor = sample.start_ns;
  const auto& cmds = sample.commands;
  auto host_gap = [&](int64_t until, int depth) {
    double us = static_cast<double>(until - cursor) / 1e3;
    if (us >= 0.0005) out += graph_line(us, depth, "host();");
  };
  for (size_t i = 0; i < cmds.size(); ++i) {
    // Linux's tpm2_start_auth_session: ContextLoad(key), StartAuthSession, FlushContext(key).
    bool group = i + 2 < cmds.size() && cmds[i].shape.command_code == cmd::ContextLoad::kInfo.code &&
                 !cmds[i].shape.session_context() &&
                 cmds[i + 1].shape.command_code == cmd::StartAuthSession::kInfo.code &&
                 cmds[i + 2].shape.command_code == cmd::FlushContext::kInfo.code;
    if (group) {
      host_gap(cmds[i].start_ns, 1);
      out += open_line(1, "tpm2_start_auth_session()");
      int64_t begin = cmds[i].start_ns;
      for (size_t j = i; j < i + 3; ++j) {
        host_gap(cmds[j].start_ns, 2);
        out += graph_line(static_cast<double>(cmds[j].duration_ns) / 1e3, 2, command_label(cmds[j].shape) + ";");
        cursor = cmds[j].start_ns + cmds[j].duration_ns;
      }
      out += graph_line(static_cast<double>(cursor - begin) / 1e3, 1, "}");
      i += 2;
      continue;
    }
    host_gap(cmds[i].start_ns, 1);
    out += graph_line(static_cast<double>(cmds[i].duration_ns) / 1e3, 1, command_label(cmds[i].shape) + ";");
    cursor = cmds[i].start_ns + cmds[i].duration_ns;
  }
  int64_t end = sample.start_ns + static_cast<int64_t>(sample.total_ms * 1e6);
  host_gap(end, 1);
  out += graph_line(sample.total_ms * 1e3, 0, "}");
  return out;
}

namespace {

// The run's head: version and date, the TPM, transport, clock and run.
std::string bench_head(const BenchResult& r, bool imported) {
  std::string out;
  const auto& t = r.tpm;
  // value() on a member that is missing or of another type: a hostile or
  // foreign result must not crash a report.
  auto text = [](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  const nlohmann::json spec = t.is_object() && t.contains("spec") ? t["spec"] : nlohmann::json::object();
  out += fmt::format("tpmsec bench {} — {}\n", r.version, r.date);
  if (imported) {
    out += fmt::format("TPM        {}  [imported from ftrace: identity as labelled, not read from the TPM]\n",
                       text(t, "label"));
  } else {
    std::string emulated =
        t.is_object() && t.value("emulated", false) ? fmt::format("  [emulated: {}]", text(t, "profile")) : "";
    out += fmt::format("TPM        {} ({}) \"{}\" firmware {}, spec {} revision {}{}\n", text(t, "manufacturer"),
                       text(t, "manufacturer_raw"), text(t, "vendor"), text(t, "firmware_version"),
                       text(spec, "family"), text(spec, "revision"), emulated);
  }
  std::string clock = imported          ? "ftrace (durations from the kernel's function_graph tracer)"
                      : r.virtual_clock ? "virtual (TPM time from the latency model, host time real)"
                                        : "real";
  out += fmt::format("transport  {}\nclock      {}\n", r.transport, clock);
  if (imported) {
    size_t extends = 0;
    for (const auto& st : r.strategies) extends += st.extends.size();
    out += fmt::format("run        {} extends imported, each counted as steady state{}\n\n", extends,
                       r.interrupted ? ", INTERRUPTED" : "");
  } else {
    out += fmt::format("run        PCR {} ({}), {} iterations per measurement{}\n\n", r.options.pcr,
                       hash_name(r.options.bank), r.options.iterations, r.interrupted ? ", INTERRUPTED" : "");
  }
  return out;
}

// One row per strategy: its cost per extend, commands, first extend and ratio to plain.
std::string strategy_table(const BenchResult& r, bool imported) {
  std::string out = fmt::format("{:<15}{:<12}{:>10}{:>10}{:>10}{:>12}{:>16}{:>10}{:>9}\n", "strategy", "protection",
                                "median", "mean", "p99", "cmds/extend", "first ms (cmds)", "host us", "x plain");
  for (const auto& s : r.strategies) {
    if (s.per_extend_ms.n == 0) {
      // Interrupted before its steady state: no 0.00 cells, no ratio against nothing.
      out += fmt::format("{:<15}{:<12}not measured ({} extend{} before the run stopped)\n", strategy_name(s.kind),
                         strategy_protection(s.kind), s.extends.size(), s.extends.size() == 1 ? "" : "s");
      continue;
    }
    // No ratio against a plain run that was not measured.
    std::string ratio = s.ratio_to_plain > 0 ? fmt::format("{:.2f}", s.ratio_to_plain) : "-";
    out += fmt::format("{:<15}{:<12}{:>10.5g}{:>10.5g}{:>10.5g}{:>12.2f}{:>11.5g} ({:>2}){:>10.1f}{:>9}\n",
                       strategy_name(s.kind), strategy_protection(s.kind), s.per_extend_ms.median, s.per_extend_ms.mean,
                       s.per_extend_ms.p99, s.tpm_commands_per_extend, s.first_extend_ms, s.first_extend_commands,
                       s.host_us.median, ratio);
  }
  out += imported ? "(per extend in ms, over every imported extend)\n\n"
                  : "(per protected extend in ms, steady state: the first extend is reported separately)\n\n";
  return out;
}

// Emulated: the model's figure per strategy and its range (docs/latency-profiles.md, "Uncertainty").
std::string model_table(const StrategyCosts& model, const std::vector<StrategyResult>& strategies) {
  std::string out = fmt::format("{:<15}{:>10}{:>22}{:>12}\n", "modelled", "ms", "range (low-high)", "from E");
  bool estimates = false;
  for (const auto& s : strategies) {
    auto ms = model.per_extend_ms.find(s.kind);
    auto range = model.range_ms.find(s.kind);
    if (ms == model.per_extend_ms.end() || range == model.range_ms.end()) continue;
    const double share = ms->second > 0 ? range->second.estimated_ms / ms->second : 0.0;
    estimates |= share > 0;
    out += fmt::format("{:<15}{:>10.5g}{:>22}{:>12}\n", strategy_name(s.kind), ms->second,
                       fmt::format("{:.2f}-{:.2f}", range->second.low_ms, range->second.high_ms),
                       fmt::format("{:.0f}%", 100 * share));
  }
  out += fmt::format("({}; the range sums every command at the low, then high end of its value's range{})\n\n",
                     model.source, estimates ? "; \"from E\" is the share of the figure from estimated values" : "");
  return out;
}

}  // namespace

std::string bench_text(const BenchResult& r) {
  const bool imported = r.clock == "ftrace";
  std::string out = bench_head(r, imported);
  if (!r.primitives.empty()) {
    out += fmt::format("{:<32}{:>6}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>10}\n", "primitive (TPM time, ms)", "n",
                       "min", "median", "mean", "p90", "p99", "max", "host us");
    for (const auto& p : r.primitives) out += distribution_row(p.name, p.tpm_ms, p.host_us);
    out += "\n";
  }
  out += strategy_table(r, imported);
  if (r.model && !r.model->range_ms.empty()) out += model_table(*r.model, r.strategies);
  if (r.strategies.empty() && r.interrupted) out += "(no strategy was measured before the run stopped)\n\n";
  for (const auto& s : r.strategies) out += function_graph(s) + "\n";
  out += r.recommendation + "\n";
  return out;
}

}  // namespace tpmsec
