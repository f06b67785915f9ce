// What the server keeps of the commands it served: totals per command
// variant (bounded: at most EmulationServer::kMaxVariants rows, further kinds
// counted together) and, only when a bench result is asked for, the first
// max_records commands. Neither grows with the number of commands.
#ifndef TPMSEC_SRC_EMULATOR_SERVER_SERVED_LOG_H_
#define TPMSEC_SRC_EMULATOR_SERVER_SERVED_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tpmsec/emulation/emulated_identity.h"
#include "tpmsec/emulation/latency_model.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/transport/tracing.h"

namespace tpmsec::emulation {

class ServedLog {
 public:
  ServedLog(bool keep_records, size_t max_records) : keep_(keep_records), max_records_(max_records) {}

  // One served command: its trace record and what the model made of it
  // (the record is kept with the model's duration: the TPM time exactly).
  // True the first time a record could not be kept (the caller says so once).
  bool add(const TraceRecord& record, const ModelledLatency& modelled);

  uint64_t commands() const { return commands_; }
  size_t records() const { return records_.size(); }
  size_t variants() const { return totals_.size(); }

  // "N TPM commands, X ms modelled TPM time (CLOCK clock)" and a row per variant.
  std::string totals(const std::string& clock) const;
  // The kept records as a bench result: one primitive per command label.
  BenchResult result(const EmulatedIdentity& identity, const std::string& transport) const;

 private:
  struct Total {
    size_t count = 0;
    double ms = 0;
  };
  bool keep_;
  size_t max_records_;
  uint64_t commands_ = 0;
  bool overflowed_ = false;
  std::vector<TraceRecord> records_;
  std::map<std::string, Total> totals_;
};

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATOR_SERVER_SERVED_LOG_H_
