#include "emulator_server/emulated_chip.h"

#include <fmt/format.h>

#include "emulator_server/identity_rewrite.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"

namespace tpmsec::emulation {

EmulatedChip::EmulatedChip(const EmulationServerOptions& options, LatencyProfile profile,
                           std::unique_ptr<Transport> embedded, const std::atomic<bool>* stop, Log log)
    : embedded_(std::move(embedded)),
      log_(std::move(log)),
      platform_(*embedded_, log_),
      latency_(
          platform_,
          LatencyModel(std::move(profile), options.means ? ModelOptions{std::nullopt, false, 0.0} : ModelOptions{}),
          clock_),
      tracing_(latency_, clock_, [this](const TraceRecord& r) { traced(r); }),
      served_(options.keep_records, options.max_records) {
  if (options.real_clock) latency_.pace_in_real_time(stop);
}

Status EmulatedChip::start() {
  Tpm tpm(*embedded_);
  TPMSEC_ASSIGN_OR_RETURN(TpmInfo real, read_tpm_info(tpm));
  identity_ = emulated_info(profile(), real);
  return ok_status();
}

Bytes EmulatedChip::execute(ByteView command, uint8_t locality) {
  platform_.set_locality(locality);
  auto answered = tracing_.transmit(command);
  Bytes response = answered.ok() ? std::move(*answered) : error_frame(rc::kFailure);
  rewrite_identity(response, command, identity_.info);
  return response;
}

// The TracingTransport's sink: after the model took the command.
void EmulatedChip::traced(const TraceRecord& record) {
  if (latency_.commands() == modelled_seen_ || !latency_.last()) return;  // not answered: not modelled
  modelled_seen_ = latency_.commands();
  const ModelledLatency& m = *latency_.last();
  if (served_.add(record, m)) {
    log_(fmt::format("--json/--trace keep the first {} commands; the totals count every one", served_.records()));
  }
  log_(fmt::format("{:<28} rc 0x{:03x} {:9.2f} ms", m.variant, record.shape.response_code, m.total_ms));
}

}  // namespace tpmsec::emulation
