// The measured layer over a TPM's transport: every command traced into a TraceLog on a Clock and, when
// emulating (--emulate PROFILE), sent through the profile's latency model and slot limits on a virtual clock.
// A TransportDecorator that observes: which TPM it is (spec(), in_process(), ...) is its base's, so the
// protect path opened over it (ProtectedTpm::open(request, transport, options)) keys its pins and kept
// state as for the base while every command it sends is counted and timed here.
// Ownership: open() owns the base, wrap() borrows it (the caller keeps it alive). A front end that hands the
// transport to ProtectedTpm::open keeps a pointer to read the log and clock; the ProtectedTpm owns it then.
// Not thread-safe. Errors come back as values (a malformed profile the caller named: kUsage).
#ifndef TPMSEC_MEASURE_MEASURED_TRANSPORT_H_
#define TPMSEC_MEASURE_MEASURED_TRANSPORT_H_

#include <memory>
#include <optional>
#include <string>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/emulation/latency_transport.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/clock.h"
#include "tpmsec/transport/tracing.h"

namespace tpmsec {

class MeasuredTransport final : public TransportDecorator {
 public:
  // `base` measured; `emulate`: a profile name or path, or empty (the steady clock, no model).
  static Result<std::unique_ptr<MeasuredTransport>> open(std::unique_ptr<Transport> base, const std::string& emulate);
  static Result<std::unique_ptr<MeasuredTransport>> wrap(Transport& base, const std::string& emulate);
  ~MeasuredTransport() override;
  MeasuredTransport(const MeasuredTransport&) = delete;
  MeasuredTransport& operator=(const MeasuredTransport&) = delete;

  Result<Bytes> transmit(ByteView command) override { return tracing_->transmit(command); }
  Status reset_tpm() override { return tracing_->reset_tpm(); }
  Status suspend_resume() override { return tracing_->suspend_resume(); }
  // The base's TPM string, with " emulating PROFILE" when emulating (what a
  // bench result names as its transport).
  std::string describe() const override { return tracing_->describe(); }

  // The transport the TPM string named.
  Transport& base() const { return inner(); }
  // Every command sent so far, its duration on clock().
  TraceLog& log() { return log_; }
  const TraceLog& log() const { return log_; }
  // The virtual clock when emulating, else the steady clock.
  const Clock& clock() const { return *clock_; }
  // The latency model when emulating, else null.
  LatencyTransport* latency() const { return latency_.get(); }
  // The emulated profile, its id (empty unless emulating) and its provenance warning (empty if none).
  const std::optional<LatencyProfile>& latency_profile() const { return latency_profile_; }
  const std::string& profile() const { return profile_; }
  const std::string& warning() const { return warning_; }

 private:
  explicit MeasuredTransport(Transport& base) : TransportDecorator(base, Traffic::kObserves) {}
  Status measure(const std::string& emulate);

  std::unique_ptr<Transport> owned_base_;
  std::unique_ptr<VirtualClock> virtual_clock_;
  std::unique_ptr<LatencyTransport> latency_;
  std::unique_ptr<TracingTransport> tracing_;
  TraceLog log_;
  const Clock* clock_ = nullptr;
  std::optional<LatencyProfile> latency_profile_;
  std::string profile_;
  std::string warning_;
};

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_MEASURED_TRANSPORT_H_
