// Transports carry command bytes to a TPM and its response back.
//
// Selected by one string (tpm2-tss TCTI syntax, so TPM2TOOLS_TCTI values for
// swtpm, mssim and device work unchanged):
//   embedded                      in-process libtpms, fresh TPM per process
//   embedded:state=DIR            same, NV state persisted in DIR
//   swtpm[:host=H,port=P]         swtpm's data port (default localhost:2321)
//   swtpm:path=SOCKET             swtpm's data port on a Unix socket
//     ...,ctrl=P2 / ctrlpath=S    swtpm's control channel, for TPM reset
//     ...,handles=private         the server flushes this connection's handles when
//                                 it closes (tpmsec emulate --private-handles):
//                                 no handle listing, no sweep (handle_ledger.h)
//   mssim[:host=H,port=P]         the Microsoft simulator protocol (tpm2-tss's mssim
//                                 TCTI; ibmswtpm2, tpmsec emulate --protocol mssim):
//                                 TPM port P (default localhost:2321), platform port P+1
//   device[:PATH]                 a TPM character device (default /dev/tpm0)
//
// Without one, the TPM is the host's as tpm2-tools would pick it (default_tpm()).
//
// Decorators (tracing, latency emulation, fault injection) wrap a Transport.
#ifndef TPMSEC_TRANSPORT_H_
#define TPMSEC_TRANSPORT_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec {

class Transport {
 public:
  virtual ~Transport() = default;

  // Sends one complete command and returns the complete response.
  virtual Result<Bytes> transmit(ByteView command) = 0;

  // A TPM Reset (_TPM_Init then Startup(CLEAR)): regenerates the null seed,
  // resets PCRs and flushes every session and transient object. Transports
  // without platform control return kUnsupported.
  virtual Status reset_tpm();

  // A suspend/resume cycle: Shutdown(STATE), _TPM_Init, Startup(STATE)
  // (TPM Resume: loaded sessions and objects are gone, the null seed stays).
  virtual Status suspend_resume();

  // The TPM string that reopens this transport, e.g. "swtpm:host=127.0.0.1,port=2321".
  virtual std::string describe() const = 0;

  // True only when the TPM runs inside this process (the embedded libtpms):
  // no bus, socket or device lies between tpmsec and it, so there is nothing
  // to interpose and the TPM's first answer can be trusted. Measuring
  // decorators (tracing, latency) forward it; anything that can alter
  // traffic (fault injection, a proxy) must not.
  virtual bool in_process() const { return false; }

  // True when a resource manager gives this client a handle space of its own
  // and flushes what the client created when it closes: the kernel's
  // /dev/tpmrm* (drivers/char/tpm/tpm2-space.c), or a swtpm: server the user
  // says does so (handles=private). Tpm's handle ledger then
  // takes no baseline and sweeps nothing (see handle_ledger.h). Decorators,
  // interposers included, forward it: they do not change who shares the TPM.
  virtual bool private_handles() const { return false; }

  // False when the TPM ends with this process (the embedded TPM without a
  // state directory): nothing kept for it (session_cache.h) can serve the
  // next process. Decorators forward it.
  virtual bool outlives_process() const { return true; }
};

// A parsed TPM string: "scheme:key=value,key=value" or "scheme:PATH".
struct TransportSpec {
  std::string scheme;
  std::string path;                            // device path (device:PATH)
  std::map<std::string, std::string> options;  // key=value pairs
};

// Parses a TPM string; errors are kUsage and name the problem.
Result<TransportSpec> parse_transport_spec(std::string_view spec);

// Opens the transport a TPM string names. The embedded and swtpm transports
// start the TPM (Startup) if it needs it. (tpmsec_transport_open: links the
// embedded TPM, hence libtpms.)
Result<std::unique_ptr<Transport>> open_transport(std::string_view spec);
// The same for a TPM behind a bus only (device:, swtpm:, mssim:); embedded is
// kUsage. What the protect path and the TCTI use: no libtpms.
Result<std::unique_ptr<Transport>> open_bus_transport(std::string_view spec);

// The TPM to use when none was given, as tpm2-tools and systemd pick the
// host's: $TPMSEC_TPM, else $TPM2TOOLS_TCTI (translated to tpmsec's syntax),
// else device:/dev/tpmrm0 when it exists, else the embedded simulator.
enum class TpmSource {
  kTpmsecTpm,     // $TPMSEC_TPM
  kTpm2ToolsTcti, // $TPM2TOOLS_TCTI
  kHostDevice,    // /dev/tpmrm0 exists
  kFallback,      // nothing named a TPM and the host has none: embedded
};
// The tpmsec TCTI's configuration (docs/tcti.md): a TPM string with
// tpmsec's protection items appended as further comma-separated items, named
// as the CLI's flags: null-name=HEX|FILE, ek-ca=PATH, tofu, salt=ecc|rsa,
// policy=FILE, log=FILE. Everything else belongs to the TPM string, in order.
struct TpmsecTctiConfig {
  std::string tpm;        // empty: none named
  std::string null_name;  // at most one of null_name, ek_ca, tofu
  std::string ek_ca;
  bool tofu = false;
  std::string salt;       // "", "ecc" or "rsa"
  std::string policy;
  std::string log;
  bool strict = false;  // refuse what would cross in clear (wrap.h, set_strict)
  bool anchor() const { return !null_name.empty() || !ek_ca.empty() || tofu; }
};
// kUsage naming the item for anything malformed or given twice.
Result<TpmsecTctiConfig> parse_tpmsec_tcti_config(std::string_view config);

struct DefaultTpm {
  std::string spec;
  TpmSource source = TpmSource::kFallback;
  // $TPM2TOOLS_TCTI named the tpmsec TCTI (tpmsec:CONFIG or its library
  // name): its configuration; `spec` is its TPM string (device:/dev/tpmrm0
  // when it names none, as the TCTI does). The caller applies the
  // protection items or says which it ignores.
  std::optional<TpmsecTctiConfig> tcti;
  // True when the embedded simulator stands in for a TPM nobody named: a
  // command that changes TPM state says so (it changes nothing on the host).
  bool unnamed_simulator() const { return source == TpmSource::kFallback; }
};
inline constexpr const char* kHostTpmDevice = "/dev/tpmrm0";
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

#endif  // TPMSEC_TRANSPORT_H_
