// `tpmsec emulate PROFILE --port P`: a profiled chip served to any TPM stack
// (swtpm's data and control channels over TCP or its Unix control socket as
// qemu drives it, or the mssim ports). The embedded libtpms answers; the
// profile's identity is reported and its latency taken through the emulation
// layer's decorators (slot limits, the latency model, tracing). The loop,
// connections, frame limits, FIFO and, with private_handles, a handle space
// per data connection are the server layer's (tpmsec-server/resource_manager/server.h); the
// channels are its protocols. Clients are never waited for; a stop is
// noticed within 200 ms, also during a modelled wait. What it keeps does not
// grow with the commands served. docs/latency-profiles.md ("tpmsec emulate:
// the server") has each protocol's frames and sources. Errors as values;
// run() on one thread.
#ifndef TPMSEC_SERVER_EMULATOR_SERVER_EMULATION_SERVER_H_
#define TPMSEC_SERVER_EMULATOR_SERVER_EMULATION_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/measure/bench.h"
#include "tpmsec/result.h"
#include "tpmsec/transport.h"

namespace tpmsec {

enum class ServerProtocol { kSwtpm, kMssim };

struct EmulationServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;      // data port P (1..65534); the control or platform port is P+1
  std::string ctrl_unix;  // instead of the ports: swtpm's control channel on this Unix socket (0600)
  ServerProtocol protocol = ServerProtocol::kSwtpm;
  bool real_clock = true;  // wait out each modelled time; false: only account it
  bool means = false;      // every command at the profile's mean (no jitter, no tail events)
  bool private_handles = false;
  bool quiet = false;         // no line per command (the startup line and errors stay)
  bool keep_records = false;  // keep per-command records for result() (--json, --trace)
  size_t max_records = 100'000;
  size_t max_clients = 32;       // per port; a connection beyond is closed at once, and logged
  int frame_timeout_ms = 5'000;  // a started frame, or an unread answer, may stall this long
};

// What the server holds, for tests and diagnostics.
struct EmulationServerStats {
  uint64_t commands = 0;      // TPM commands served (including FlushContexts it sent)
  size_t records = 0;         // per-command records kept (0 unless keep_records)
  size_t variants = 0;        // rows of the totals
  size_t clients = 0;         // open connections, both ports
  size_t handle_entries = 0;  // private handles: slots and clients it tracks
  uint64_t dropped = 0;       // connections dropped for stalling
};

class EmulationServer {
 public:
  // At most this many rows in the totals; further kinds of command are counted together.
  static constexpr size_t kMaxVariants = 512;

  // Listens on options.port and port + 1 and prints the startup line.
  // `tpm` is the embedded transport (open_embedded: its state directory
  // stays its own business). `stop` ends run() when it turns true.
  static Result<std::unique_ptr<EmulationServer>> start(EmulationServerOptions options, LatencyProfile profile,
                                                        std::unique_ptr<Transport> tpm, const std::atomic<bool>* stop);
  ~EmulationServer();

  // Serves until *stop, the control channel's CMD_SHUTDOWN or mssim's TPM_STOP.
  Status run();

  // "N TPM commands, X ms modelled TPM time (C clock)" and a row per variant.
  std::string totals() const;
  // Everything served as a bench result (--json, --trace): the kept records.
  BenchResult result() const;
  EmulationServerStats stats() const;

  class Impl;

 private:
  explicit EmulationServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpmsec

#endif  // TPMSEC_SERVER_EMULATOR_SERVER_EMULATION_SERVER_H_
