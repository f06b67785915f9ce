#include "emulator_server/served_log.h"

#include <fmt/format.h>

#include <cmath>

#include "tpmsec-server/emulator_server/emulation_server.h"
#include "tpmsec/emulation/tpm_info_json.h"
#include "tpmsec/measure/statistics.h"

namespace tpmsec::emulation {
namespace {
constexpr char kOtherVariants[] = "(other commands)";
}  // namespace

bool ServedLog::add(const TraceRecord& record, const ModelledLatency& modelled) {
  ++commands_;
  auto it = totals_.find(modelled.variant);
  if (it == totals_.end()) {
    // The last row is kept for the kinds that do not fit.
    const bool room = totals_.size() + 1 < EmulationServer::kMaxVariants;
    it = totals_.try_emplace(room ? modelled.variant : std::string(kOtherVariants)).first;
  }
  ++it->second.count;
  it->second.ms += modelled.total_ms;
  if (!keep_) return false;
  if (records_.size() < max_records_) {
    // The model's time, as the log line and the totals give it: the clock
    // around the command also holds the emulator's own host time (and, on
    // the real clock, how late the wait woke up).
    records_.push_back(record);
    records_.back().duration_ns = std::llround(modelled.total_ms * 1e6);
    return false;
  }
  const bool first = !overflowed_;
  overflowed_ = true;
  return first;
}

std::string ServedLog::totals(const std::string& clock) const {
  double total = 0;
  for (const auto& [variant, t] : totals_) total += t.ms;
  std::string out =
      fmt::format("tpmsec emulate: {} TPM commands, {:.2f} ms modelled TPM time ({} clock)\n", commands_, total, clock);
  if (totals_.empty()) return out;
  out += fmt::format("  {:<32} {:>7} {:>12} {:>10}\n", "command", "count", "total ms", "mean ms");
  for (const auto& [variant, t] : totals_) {
    out += fmt::format("  {:<32} {:>7} {:>12.2f} {:>10.2f}\n", variant, t.count, t.ms,
                       t.ms / static_cast<double>(t.count));
  }
  return out;
}

BenchResult ServedLog::result(const EmulatedIdentity& identity, const std::string& transport) const {
  BenchResult r;
  r.tpm = to_json(identity);
  r.transport = transport;
  r.virtual_clock = true;  // every TPM time below is the model's, also when it was slept
  r.date = utc_timestamp();
  r.version = TPMSEC_VERSION;
  r.options.iterations = 0;
  r.options.pcr = 0;
  r.options.bank = 0;
  r.options.checkpoint_every = 0;
  r.options.strategies.clear();
  std::map<std::string, PrimitiveResult> by_label;
  std::vector<std::string> order;
  for (const TraceRecord& rec : records_) {
    std::string label = command_label(rec.shape);
    if (!by_label.count(label)) {
      order.push_back(label);
      by_label[label].name = label;
    }
    Sample s;
    s.start_ns = rec.start_ns;
    s.total_ms = s.tpm_ms = static_cast<double>(rec.duration_ns) / 1e6;
    s.commands = {rec};
    by_label[label].samples.push_back(std::move(s));
  }
  for (const auto& label : order) {
    PrimitiveResult p = std::move(by_label[label]);
    std::vector<double> ms;
    for (const auto& s : p.samples) ms.push_back(s.tpm_ms);
    p.tpm_ms = summarize(ms);
    r.primitives.push_back(std::move(p));
  }
  return r;
}

}  // namespace tpmsec::emulation
