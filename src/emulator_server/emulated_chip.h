// The profiled chip the server serves: the embedded libtpms behind the
// emulation layer's decorators, innermost first:
//   PlatformTransport  power and locality (the clients' platform signals)
//   LatencyTransport   the chip's slot limits (SlotLimitTransport) and the
//                      latency model on a VirtualClock, waiting the modelled
//                      time out with --clock real
//   TracingTransport   a record per command, into the ServedLog and the log
// and the profile's identity in unauthenticated GetCapability answers.
// One command at a time; not thread-safe.
#ifndef TPMSEC_SRC_EMULATOR_SERVER_EMULATED_CHIP_H_
#define TPMSEC_SRC_EMULATOR_SERVER_EMULATED_CHIP_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "emulator_server/platform_transport.h"
#include "emulator_server/served_log.h"
#include "tpmsec-server/emulator_server/emulation_server.h"
#include "tpmsec/emulation/emulated_identity.h"
#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/emulation/latency_transport.h"
#include "tpmsec/transport/tracing.h"

namespace tpmsec::emulation {

class EmulatedChip {
 public:
  using Log = std::function<void(const std::string&)>;
  EmulatedChip(const EmulationServerOptions& options, LatencyProfile profile, std::unique_ptr<Transport> embedded,
               const std::atomic<bool>* stop, Log log);

  // Reads the real TPM's identity (directly: not billed) for the emulated one.
  Status start();

  // Runs one command at `locality` through the decorators: billed, logged
  // (before the answer is sent) and recorded. Always a TPM answer.
  Bytes execute(ByteView command, uint8_t locality);

  PlatformTransport& platform() { return platform_; }
  // The embedded TPM itself, for the bookkeeping a chip's driver keeps
  // without sending commands (handle listings): neither billed nor logged.
  Transport& unbilled() { return *embedded_; }
  const ServedLog& served() const { return served_; }
  const LatencyProfile& profile() const { return latency_.model().profile(); }
  const EmulatedIdentity& identity() const { return identity_; }

 private:
  void traced(const TraceRecord& record);

  std::unique_ptr<Transport> embedded_;
  Log log_;
  PlatformTransport platform_;
  VirtualClock clock_;
  LatencyTransport latency_;
  TracingTransport tracing_;
  ServedLog served_;
  EmulatedIdentity identity_;
  size_t modelled_seen_ = 0;
};

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATOR_SERVER_EMULATED_CHIP_H_
