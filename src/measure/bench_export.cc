// Machine-readable bench outputs: JSON (docs/bench-json.md), CSV, Chrome trace events.
#include <fmt/format.h>

#include "tpmsec/emulation/value_range.h"
#include "tpmsec/measure/bench.h"

namespace tpmsec {
namespace {

nlohmann::json commands_json(const Sample& s) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : s.commands) {
    out.push_back({{"command", command_label(c.shape)},
                   {"ms", static_cast<double>(c.duration_ns) / 1e6},
                   {"rc", fmt::format("0x{:03x}", c.shape.response_code)}});
  }
  return out;
}

nlohmann::json sample_json(const Sample& s) {
  return {{"total_ms", s.total_ms}, {"tpm_ms", s.tpm_ms}, {"host_ms", s.host_ms}, {"commands", commands_json(s)}};
}

}  // namespace

nlohmann::json bench_json(const BenchResult& r) {
  using nlohmann::json;
  json primitives = json::array();
  for (const auto& p : r.primitives) {
    primitives.push_back({{"name", p.name}, {"tpm_ms", to_json(p.tpm_ms)}, {"host_us", to_json(p.host_us)}});
  }
  json strategies = json::array();
  for (const auto& s : r.strategies) {
    const Sample* rep = representative_extend(s);
    strategies.push_back({
        {"name", strategy_name(s.kind)},
        {"protection", strategy_protection(s.kind)},
        {"per_extend_ms",
         {{"median", s.per_extend_ms.median},
          {"mean", s.per_extend_ms.mean},
          {"p90", s.per_extend_ms.p90},
          {"p99", s.per_extend_ms.p99},
          {"min", s.per_extend_ms.min},
          {"max", s.per_extend_ms.max},
          {"n", s.per_extend_ms.n}}},
        {"tpm_commands_per_extend", s.tpm_commands_per_extend},
        {"ratio_to_plain", s.ratio_to_plain},
        {"first_extend", {{"ms", s.first_extend_ms}, {"tpm_commands", s.first_extend_commands}}},
        {"open", sample_json(s.open)},
        {"finish", sample_json(s.finish)},
        {"host_us", to_json(s.host_us)},
        {"breakdown", rep ? commands_json(*rep) : json::array()},
    });
    // Emulated: what the profile's model gives for this strategy, with its range.
    if (r.model) {
      auto ms = r.model->per_extend_ms.find(s.kind);
      auto range = r.model->range_ms.find(s.kind);
      if (ms != r.model->per_extend_ms.end() && range != r.model->range_ms.end()) {
        strategies.back()["model_ms"] =
            range_json(ms->second, range->second.low_ms, range->second.high_ms, range->second.estimated_ms);
      }
    }
  }
  return {{"schema", "tpmsec-bench/1"},
          {"tpmsec_version", r.version},
          {"date", r.date},
          {"tpm", r.tpm},
          {"transport", r.transport},
          {"clock", clock_name(r)},
          {"pcr", r.options.pcr},
          {"bank", std::string(hash_name(r.options.bank))},
          {"iterations", r.options.iterations},
          {"checkpoint_every", r.options.checkpoint_every},
          {"interrupted", r.interrupted},
          {"primitives", primitives},
          {"strategies", strategies},
          {"recommendation", r.recommendation}};
}

namespace {
// One CSV field per RFC 4180: quoted (quotes doubled) when it holds a comma,
// a quote, CR or LF — "CreatePrimary (null key, ECC)" is one field.
std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}
}  // namespace

// RFC 4180: CRLF line ends, a header row, fields quoted where needed.
std::string bench_csv(const BenchResult& r) {
  std::string out = "kind,name,iteration,total_ms,tpm_ms,host_ms,tpm_commands\r\n";
  auto row = [&out](const char* kind, std::string_view name, size_t i, const Sample& s) {
    out += fmt::format("{},{},{},{:.6f},{:.6f},{:.6f},{}\r\n", kind, csv_field(name), i, s.total_ms, s.tpm_ms,
                       s.host_ms, s.commands.size());
  };
  for (const auto& p : r.primitives) {
    for (size_t i = 0; i < p.samples.size(); ++i) row("primitive", p.name, i, p.samples[i]);
  }
  for (const auto& s : r.strategies) {
    for (size_t i = 0; i < s.extends.size(); ++i) row("strategy", strategy_name(s.kind), i, s.extends[i]);
  }
  return out;
}

nlohmann::json bench_trace(const BenchResult& r) {
  using nlohmann::json;
  json events = json::array();
  int64_t origin = -1;
  auto us = [&origin](int64_t ns) { return static_cast<double>(ns - origin) / 1e3; };
  auto consider = [&origin](const Sample& s) {
    if (origin < 0 || s.start_ns < origin) origin = s.start_ns;
  };
  for (const auto& p : r.primitives) {
    for (const auto& s : p.samples) consider(s);
  }
  for (const auto& s : r.strategies) consider(s.open);
  if (origin < 0) origin = 0;
  auto span = [&](const std::string& name, const std::string& cat, int tid, const Sample& s) {
    events.push_back({{"name", name},
                      {"cat", cat},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", tid},
                      {"ts", us(s.start_ns)},
                      {"dur", s.total_ms * 1e3}});
    for (const auto& c : s.commands) {
      events.push_back({{"name", command_label(c.shape)},
                        {"cat", "tpm"},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", tid},
                        {"ts", us(c.start_ns)},
                        {"dur", static_cast<double>(c.duration_ns) / 1e3},
                        {"args",
                         {{"rc", fmt::format("0x{:03x}", c.shape.response_code)},
                          {"command_bytes", c.shape.command_bytes},
                          {"response_bytes", c.shape.response_bytes}}}});
    }
  };
  for (const auto& p : r.primitives) {
    for (const auto& s : p.samples) span(p.name, "primitive", 1, s);
  }
  int tid = 2;
  for (const auto& s : r.strategies) {
    std::string name(strategy_name(s.kind));
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", name}}}});
    span(name + ": open", "strategy", tid, s.open);
    for (const auto& e : s.extends) span(name + ": extend", "strategy", tid, e);
    span(name + ": finish", "strategy", tid, s.finish);
    ++tid;
  }
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "primitives"}}}});
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "tpmsec bench: " + r.transport}}}});
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"clock", clock_name(r)}, {"tpmsec_version", r.version}}}};
}

}  // namespace tpmsec
