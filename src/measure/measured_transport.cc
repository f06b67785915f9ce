// MeasuredTransport (measured_transport.h): the base traced, behind the
// emulated profile's latency model on a virtual clock when emulating.
#include "tpmsec/measure/measured_transport.h"

#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/profile_summary.h"

namespace tpmsec {

Result<std::unique_ptr<MeasuredTransport>> MeasuredTransport::open(std::unique_ptr<Transport> base,
                                                                   const std::string& emulate) {
  if (!base) return usage_error("no TPM transport");
  std::unique_ptr<MeasuredTransport> m(new MeasuredTransport(*base));
  m->owned_base_ = std::move(base);
  TPMSEC_RETURN_IF_ERROR(m->measure(emulate));
  return m;
}

Result<std::unique_ptr<MeasuredTransport>> MeasuredTransport::wrap(Transport& base, const std::string& emulate) {
  std::unique_ptr<MeasuredTransport> m(new MeasuredTransport(base));
  TPMSEC_RETURN_IF_ERROR(m->measure(emulate));
  return m;
}

MeasuredTransport::~MeasuredTransport() = default;

Status MeasuredTransport::measure(const std::string& emulate) {
  Transport* inner = &base();
  if (!emulate.empty()) {
    Result<LatencyProfile> loaded = load_profile(emulate);
    if (!loaded.ok()) {
      // A malformed profile the caller named is unusable input (kUsage, the
      // file and position in the message), not a TPM's malformed answer.
      if (loaded.error().kind() == ErrorKind::kParse) return usage_error(loaded.error().message());
      return loaded.error();
    }
    latency_profile_ = std::move(*loaded);
    virtual_clock_ = std::make_unique<VirtualClock>();
    latency_ = std::make_unique<LatencyTransport>(*inner, LatencyModel(*latency_profile_), *virtual_clock_);
    inner = latency_.get();
    clock_ = virtual_clock_.get();
    profile_ = latency_profile_->id;
    warning_ = provenance_warning(*latency_profile_);
  } else {
    clock_ = &steady_clock();
  }
  tracing_ = std::make_unique<TracingTransport>(*inner, *clock_, log_.sink());
  return ok_status();
}

}  // namespace tpmsec
