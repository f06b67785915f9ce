// Transports carry command bytes to a TPM and its response back. The core's contract for a bus, and the
// typed TpmSpec a TPM string parses into. A TPM string (tpm2-tss TCTI syntax, so TPM2TOOLS_TCTI values for
// swtpm, mssim and device work unchanged) selects one: embedded[:state=DIR], swtpm[:...], mssim[:...],
// device[:PATH], serve[:path=SOCKET]; without one, the TPM is the host's as tpm2-tools would pick it
// (default_tpm()). The parser and the openers are the transports layer's (tpmsec/transport/tpm_string.h);
// a string with protection items (null-name=, tofu, ...) is the protect layer's (tpmsec/tpm_config.h).
// Decorators (tracing, latency emulation, slot limits, fault injection) wrap a Transport: a
// TransportDecorator borrows the one it wraps (the caller keeps it alive) and forwards what it names.
// Errors: transmit() returns the complete response or an error value (Result), never a partial frame;
// reset_tpm() and suspend_resume() are kUnsupported without platform control. A response is the TPM's
// word only: hostile until parsed and authenticated above. Not thread-safe: one command at a time.
// Every TPM string's keys and defaults: docs/architecture.md, "TPM strings (include/tpmsec/transport.h)".
#ifndef TPMSEC_TRANSPORT_H_
#define TPMSEC_TRANSPORT_H_

#include <map>
#include <string>
#include <utility>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec {

// What a TPM string names, parsed once (parse_transport_spec(),
// tpmsec/transport/tpm_string.h): "scheme:key=value,key=value" or
// "scheme:PATH".
// kServe: a `tpmsec serve` server (serve_transport.cc), which protects the
// bus itself; the protect path starts no session on it (protect.h).
enum class TpmKind { kNone, kEmbedded, kSwtpm, kMssim, kDevice, kServe };
struct TpmSpec {
  TpmKind kind = TpmKind::kNone;               // kNone: no TPM string (a test's double)
  std::string scheme;                          // "embedded", "swtpm", "mssim", "device", "serve"
  std::string path;                            // device path (device:PATH)
  std::map<std::string, std::string> options;  // key=value pairs, as given
  // The value of `key`, else `fallback`.
  std::string option(const std::string& key, const std::string& fallback = "") const {
    auto it = options.find(key);
    return it == options.end() ? fallback : it->second;
  }
};
using TransportSpec = TpmSpec;

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

  // What the TPM string this transport was opened from names, parsed once
  // by its opener (tpm_string.h); kind kNone for a transport no TPM string
  // opened. Decorators forward it (TransportDecorator). Read this, never
  // describe()'s text.
  virtual TpmSpec spec() const { return spec_; }
  // Set by the opener that parsed the string.
  void set_spec(TpmSpec spec) { spec_ = std::move(spec); }

  // True only when the TPM runs inside this process (the embedded libtpms):
  // no bus, socket or device lies between tpmsec and it, so there is nothing
  // to interpose and the TPM's first answer can be trusted. Measuring
  // decorators (tracing, latency) forward it; anything that can alter
  // traffic (fault injection, a proxy) must not.
  virtual bool in_process() const { return false; }

  // True when a resource manager gives this client a handle space of its own
  // and flushes what the client created when it closes: the kernel's
  // /dev/tpmrm* (drivers/char/tpm/tpm2-space.c), a tpmsec server (serve:),
  // or a swtpm: server the user says does so (handles=private). Tpm's handle ledger then
  // takes no baseline and sweeps nothing (see handle_ledger.h). Decorators,
  // interposers included, forward it: they do not change who shares the TPM.
  virtual bool private_handles() const { return false; }

  // False when the TPM ends with this process (the embedded TPM without a
  // state directory): nothing kept for it (session_cache.h) can serve the
  // next process. Decorators forward it.
  virtual bool outlives_process() const { return true; }

 private:
  TpmSpec spec_;
};

// A transport in front of another (tracing, a latency model or a chip's
// slots, a command budget, an interposer, a server's view of its bus): which
// TPM it is -- its TPM string (describe()), what that string names (spec(),
// final here), whether a resource manager keeps its handles apart, whether
// it outlives the process -- is the inner transport's, forwarded here so no
// decorator can forget one. A decorator overrides describe() only to add to
// the text, private_handles() only when it is itself the resource manager.
// in_process() is forwarded only by a decorator that watches the TPM or is
// part of it (kObserves: tracing, the latency model and the chip's slots, a
// resource manager's command budget); one an attacker could stand in, or
// that answers for the TPM (kAlters: an interposer, a fault injector,
// serve's status front), is never in process. Platform control
// (reset_tpm(), suspend_resume()) is not forwarded unless a decorator says
// so: it belongs to whoever owns the TPM.
class TransportDecorator : public Transport {
 public:
  enum class Traffic { kObserves, kAlters };
  TransportDecorator(Transport& inner, Traffic traffic) : inner_(&inner), traffic_(traffic) {}

  std::string describe() const override { return inner_->describe(); }
  TpmSpec spec() const final { return inner_->spec(); }
  bool in_process() const override { return traffic_ == Traffic::kObserves && inner_->in_process(); }
  bool private_handles() const override { return inner_->private_handles(); }
  bool outlives_process() const override { return inner_->outlives_process(); }

 protected:
  Transport& inner() const { return *inner_; }

 private:
  Transport* inner_;
  Traffic traffic_;
};

}  // namespace tpmsec

#endif  // TPMSEC_TRANSPORT_H_
