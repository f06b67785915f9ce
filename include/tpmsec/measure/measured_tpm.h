// A TPM set up for measurement: a Tpm over a MeasuredTransport (traced, behind a latency profile on a
// virtual clock when emulating: measured_transport.h), the TPM's capabilities and the identity it presents
// (the profile's when emulating). Every measuring command (bench, replay, predict, calibrate) reads one.
// Ownership: measure_tpm() and open_measured_tpm() own the measured transport and the Tpm; measured_view()
// borrows both (a ProtectedTpm's, opened over the measured transport: they must outlive the view).
// Not thread-safe. Errors come back as values.
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
#include "tpmsec/measure/measured_transport.h"
#include "tpmsec/transport/clock.h"

namespace tpmsec {

struct MeasuredTpm {
  explicit MeasuredTpm(MeasuredTransport& measured);
  std::unique_ptr<MeasuredTransport> owned_transport;  // set unless a view
  MeasuredTransport& transport;
  // What the measuring commands read of `transport` (measured_transport.h):
  Transport* base;                                       // the TPM string's transport
  TraceLog& log;                                         // every command, timed on `clock`
  const Clock* clock;                                    // virtual when emulating
  LatencyTransport* latency;                             // the model, when emulating
  const std::optional<LatencyProfile>& latency_profile;  // the emulated profile
  const std::string& profile;                            // profile id, empty unless emulating
  const std::string& warning;                            // the profile's provenance warning, if any
  std::unique_ptr<Tpm> owned_tpm;                        // set unless a view
  Tpm* tpm = nullptr;                                    // sends over `transport`
  TpmInfo info;                                          // the real TPM's capabilities
  nlohmann::json identity;                   // as `info --json` plus "emulated"; the profile's TPM when emulating
  std::optional<EmulatedIdentity> emulated;  // set when emulating
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
// A view of `tpm` (which sends over `transport`) whose capabilities are `info`: the protect path's TPM
// opened over a measured transport (ProtectedTpm::open; its tpm() and info()), read as measured.
std::unique_ptr<MeasuredTpm> measured_view(MeasuredTransport& transport, Tpm& tpm, const TpmInfo& info);

}  // namespace tpmsec

#endif  // TPMSEC_MEASURE_MEASURED_TPM_H_
