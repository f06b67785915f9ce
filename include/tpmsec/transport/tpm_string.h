// TPM strings (transport.h's syntax): their one parser, the openers of the
// transports they name, and the TPM to use when none was given. The
// transports layer's: the core's transport.h declares only what a Transport
// is and what a parsed string (TpmSpec) holds. A TPM string with tpmsec's
// protection items is split by the protect layer (tpmsec/tpm_config.h).
#ifndef TPMSEC_TRANSPORT_TPM_STRING_H_
#define TPMSEC_TRANSPORT_TPM_STRING_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tpmsec/result.h"
#include "tpmsec/tpm_id.h"
#include "tpmsec/transport.h"

namespace tpmsec {

// Parses a TPM string; errors are kUsage and name the problem.
Result<TpmSpec> parse_transport_spec(std::string_view spec);

// The TPM string the transport `spec` names describes itself by (its
// describe(), transports.h), rendered without opening it.
std::string tpm_string_of(const TpmSpec& spec);
// Which TPM `spec` names, as host state keys it (tpm_id.h): from its TPM
// string's rendering, never from a connection.
TpmId tpm_id_of(const TpmSpec& spec);
// Which TPM is behind `transport`: its spec's (decorators forward it), or,
// for a transport no TPM string opened (kNone: a test's double, a device
// handed over as a descriptor), the text it describes itself by.
TpmId tpm_id_of(const Transport& transport);

// Opens the transport a TPM string names; its spec() is the parsed string.
// The embedded and swtpm transports start the TPM (Startup) if it needs it.
// (tpmsec_transport_open: links the embedded TPM, hence libtpms.)
Result<std::unique_ptr<Transport>> open_transport(std::string_view spec);
// The same for a TPM string parsed already (a front end resolves its TPM once).
Result<std::unique_ptr<Transport>> open_transport(const TpmSpec& spec);
// The same for a TPM behind a bus only (device:, swtpm:, mssim:, serve:); embedded is
// kUsage. What the protect path and the TCTI use: no libtpms.
Result<std::unique_ptr<Transport>> open_bus_transport(std::string_view spec);
Result<std::unique_ptr<Transport>> open_bus_transport(const TpmSpec& spec);

// The TPM to use when none was given, as tpm2-tools and systemd pick the
// host's: $TPMSEC_TPM, else $TPM2TOOLS_TCTI (translated to tpmsec's syntax),
// else device:/dev/tpmrm0 when it exists, else the embedded simulator.
enum class TpmSource {
  kTpmsecTpm,      // $TPMSEC_TPM
  kTpm2ToolsTcti,  // $TPM2TOOLS_TCTI
  kHostDevice,     // /dev/tpmrm0 exists
  kFallback,       // nothing named a TPM and the host has none: embedded
  kGiven,          // a front end's flag (--tpm)
};
struct DefaultTpm {
  // The TPM string. From $TPMSEC_TPM, or the tpmsec TCTI's configuration
  // ($TPM2TOOLS_TCTI=tpmsec:CONFIG, empty when it names none), as written:
  // it may carry protection items, which tpm_config.h's choose_tpm() splits
  // off and checks.
  std::string spec;
  TpmSource source = TpmSource::kFallback;
  bool tpmsec_tcti = false;  // $TPM2TOOLS_TCTI named the tpmsec TCTI
  // True when the embedded simulator stands in for a TPM nobody named: a
  // command that changes TPM state says so (it changes nothing on the host).
  bool unnamed_simulator() const { return source == TpmSource::kFallback; }
};
inline constexpr const char* kHostTpmDevice = "/dev/tpmrm0";
// Whether kHostTpmDevice exists.
bool host_tpm_device();
// The decision from the two variables' values (nullptr or empty: unset) and
// whether kHostTpmDevice exists. A TPM2TOOLS_TCTI tpmsec cannot speak
// (tabrmd, a library path it cannot map) is a usage error naming the variable.
Result<DefaultTpm> choose_default_tpm(const char* tpmsec_tpm, const char* tpm2tools_tcti, bool host_device);
// The same from this process's environment and the host's /dev.
Result<DefaultTpm> default_tpm();
// A tpm2-tss TCTI string (TPM2TOOLS_TCTI's syntax: "device", "device:/dev/tpm0",
// "mssim:host=H,port=P", "swtpm:...", "libtss2-tcti-device.so.0:/dev/tpm0")
// as a tpmsec TPM string; kUsage for a TCTI tpmsec has no transport for.
Result<std::string> tpm_string_from_tcti(std::string_view tcti, bool host_device);

}  // namespace tpmsec

#endif  // TPMSEC_TRANSPORT_TPM_STRING_H_
