// A TPM set up for measurement: its transport, optionally behind a latency
// profile on a virtual clock (--emulate), traced into a TraceLog on a Clock.
// Every measuring command (bench, replay, predict, calibrate) opens one.
#ifndef TPMSEC_MEASURE_MEASURED_TPM_H_
#define TPMSEC_MEASURE_MEASURED_TPM_H_

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tpmsec/emulation/emulated_identity.h"
#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/emulation/latency_transport.h"
#include "tpmsec/emulation/tpm_info_json.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/transport/clock.h"

namespace tpmsec {

struct MeasuredTpm {
  std::unique_ptr<Transport> owned_base;  // set when opened from a TPM string
  Transport* base = nullptr;
  std::unique_ptr<VirtualClock> virtual_clock;
  std::unique_ptr<LatencyTransport> latency;
  std::unique_ptr<TracingTransport> tracing;
  std::unique_ptr<Tpm> tpm;
  TraceLog log;
  const Clock* clock = nullptr;
  TpmInfo info;                                   // the real TPM's capabilities
  nlohmann::json identity;                        // as `info --json` plus "emulated"; the profile's TPM when emulating
  std::optional<EmulatedIdentity> emulated;       // set when emulating
  std::optional<LatencyProfile> latency_profile;  // the emulated profile
  std::string profile;                            // profile id, empty unless emulating
  std::string warning;                            // the profile's provenance warning, if any
};

// Wraps `base` (not owned). `emulate`: a profile name or path, or empty.
// `known_info`: the TPM's capabilities as an earlier process read them
// (session_cache.h); without, they are read (four GetCapability).
Result<std::unique_ptr<MeasuredTpm>> measure_tpm(Transport& base, const std::string& emulate,
                                                 const TpmInfo* known_info = nullptr);
// Opens the TPM string `spec` and wraps it.
Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const std::string& spec, const std::string& emulate);
// The same for a TPM string a front end parsed already.
Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const TpmSpec& spec, const std::string& emulate);

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_MEASURED_TPM_H_
