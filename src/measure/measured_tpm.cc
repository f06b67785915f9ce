#include "tpmsec/measure/measured_tpm.h"

#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {

MeasuredTpm::MeasuredTpm(MeasuredTransport& measured)
    : transport(measured),
      base(&measured.base()),
      log(measured.log()),
      clock(&measured.clock()),
      latency(measured.latency()),
      latency_profile(measured.latency_profile()),
      profile(measured.profile()),
      warning(measured.warning()) {}

std::unique_ptr<MeasuredTpm> measured_view(MeasuredTransport& transport, Tpm& tpm, const TpmInfo& info) {
  auto m = std::make_unique<MeasuredTpm>(transport);
  m->tpm = &tpm;
  m->info = info;
  if (m->latency_profile) {
    m->emulated = emulated_info(*m->latency_profile, m->info);
    m->identity = to_json(*m->emulated);
  } else {
    m->identity = to_json(m->info);
    m->identity["emulated"] = false;
  }
  return m;
}

namespace {

// `transport` (owned from here) with a Tpm of its own, its capabilities
// `known_info` or read.
Result<std::unique_ptr<MeasuredTpm>> with_tpm(std::unique_ptr<MeasuredTransport> transport, const TpmInfo* known_info) {
  auto tpm = std::make_unique<Tpm>(*transport);
  TpmInfo info;
  if (known_info) {
    info = *known_info;
  } else {
    TPMSEC_ASSIGN_OR_RETURN(info, read_tpm_info(*tpm));
  }
  std::unique_ptr<MeasuredTpm> m = measured_view(*transport, *tpm, info);
  m->owned_transport = std::move(transport);
  m->owned_tpm = std::move(tpm);
  return m;
}

}  // namespace

Result<std::unique_ptr<MeasuredTpm>> measure_tpm(Transport& base, const std::string& emulate,
                                                 const TpmInfo* known_info) {
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<MeasuredTransport> transport, MeasuredTransport::wrap(base, emulate));
  return with_tpm(std::move(transport), known_info);
}

Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const std::string& spec, const std::string& emulate) {
  TPMSEC_ASSIGN_OR_RETURN(TpmSpec parsed, parse_transport_spec(spec));
  return open_measured_tpm(parsed, emulate);
}

Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const TpmSpec& spec, const std::string& emulate) {
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> base, open_transport(spec));
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<MeasuredTransport> transport,
                          MeasuredTransport::open(std::move(base), emulate));
  return with_tpm(std::move(transport), nullptr);
}

}  // namespace tpmsec
