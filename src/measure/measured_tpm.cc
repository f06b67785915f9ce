#include "tpmsec/measure/measured_tpm.h"
#include "tpmsec/transport/tpm_string.h"

#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/profile_summary.h"

namespace tpmsec {

Result<std::unique_ptr<MeasuredTpm>> measure_tpm(Transport& base, const std::string& emulate,
                                                 const TpmInfo* known_info) {
  auto m = std::make_unique<MeasuredTpm>();
  m->base = &base;
  Transport* inner = &base;
  std::optional<LatencyProfile> profile;
  if (!emulate.empty()) {
    Result<LatencyProfile> loaded = load_profile(emulate);
    if (!loaded.ok()) {
      // A malformed profile the caller named is unusable input (kUsage, the
      // file and position in the message), not a TPM's malformed answer.
      if (loaded.error().kind() == ErrorKind::kParse) return usage_error(loaded.error().message());
      return loaded.error();
    }
    profile = std::move(*loaded);
    m->virtual_clock = std::make_unique<VirtualClock>();
    m->latency = std::make_unique<LatencyTransport>(*inner, LatencyModel(*profile), *m->virtual_clock);
    inner = m->latency.get();
    m->clock = m->virtual_clock.get();
    m->profile = profile->id;
    m->warning = provenance_warning(*profile);
  } else {
    m->clock = &steady_clock();
  }
  m->tracing = std::make_unique<TracingTransport>(*inner, *m->clock, m->log.sink());
  m->tpm = std::make_unique<Tpm>(*m->tracing);
  if (known_info) {
    m->info = *known_info;
  } else {
    TPMSEC_ASSIGN_OR_RETURN(m->info, read_tpm_info(*m->tpm));
  }
  if (profile) {
    m->emulated = emulated_info(*profile, m->info);
    m->latency_profile = profile;
    m->identity = to_json(*m->emulated);
  } else {
    m->identity = to_json(m->info);
    m->identity["emulated"] = false;
  }
  return m;
}

Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const std::string& spec, const std::string& emulate) {
  TPMSEC_ASSIGN_OR_RETURN(TpmSpec parsed, parse_transport_spec(spec));
  return open_measured_tpm(parsed, emulate);
}

Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const TpmSpec& spec, const std::string& emulate) {
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> base, open_transport(spec));
  TPMSEC_ASSIGN_OR_RETURN(auto m, measure_tpm(*base, emulate));
  m->owned_base = std::move(base);
  return m;
}

}  // namespace tpmsec
