// `tpmsec emulate PROFILE --port P`: a profiled chip served to any TPM stack
// over TCP. The embedded libtpms answers; the profile's identity is reported
// and its latency taken on every command, through the emulation layer's own
// decorators (the chip's slot limits, the latency model on a virtual clock,
// tracing): the one implementation of emulated timing.
//
// Protocols, as their projects document them:
//   swtpm data channel (port P): the raw TPM command, the raw response.
//   swtpm control channel (P+1; swtpm's include/swtpm/tpm_ioctl.h, "commands
//     used by the non-CUSE TPMs"): a big-endian u32 command code and its
//     request fields; the answer is the response fields, starting with a u32
//     result.
//   swtpm control channel on a Unix socket (ctrl_unix; `swtpm socket --ctrl
//     type=unixio,path=S`, as qemu's tpm-emulator backend drives it, qemu's
//     backends/tpm/tpm_emulator.c): the same commands, each request the
//     whole ptm_* structure, and CMD_SET_DATAFD, whose SCM_RIGHTS descriptor
//     becomes a data channel (raw frames). No TCP port then.
//   mssim TPM port (P; tpm2-tss tcti-mssim, TpmTcpProtocol.h): u32
//     TPM_SEND_COMMAND (8), u8 locality, u32 size, the command; answered by
//     u32 size, the response, u32 0. TPM_SESSION_END (20) ends a connection.
//   mssim platform port (P+1): u32 signal (power on/off, NV on, reset, ...),
//     answered by u32 0.
//
// Clients: several at once on each port, as a chip on a bus shared by
// several programs; their commands run one at a time on the one TPM, each to
// completion (with --clock real, the modelled time is waited out before the
// next command starts). A client is never waited for: every connection has
// its own bounded buffers, a frame larger than the TPM's 4096-byte buffer is
// refused, and a client that stops in the middle of a frame (or does not
// read its answer) for frame_timeout_ms is dropped. A stop (the flag, e.g.
// from SIGTERM) is noticed within 200 ms, also during a modelled wait.
//
// The loop, connections, frame limits and FIFO are the server layer's
// (tpmsec/server/server.h); swtpm's data channel is its raw protocol.
// private_handles: each data connection a handle space of its own, as
// /dev/tpmrm0 and tpm2-abrmd keep them (tpmsec/server/handle_space.h):
// virtual object handles, objects and sessions swapped out (least recently
// used first) when a command needs their slot, listings of the client's own handles,
// another client's handles refused, what a closing client left flushed. The
// ContextSave, ContextLoad and FlushContext commands that costs are billed
// and logged as any command.
//
// What the server keeps does not grow with the commands served: totals per
// command variant (at most kMaxVariants kinds) and, only when asked for
// (keep_records, for --json/--trace), the first max_records commands.
#ifndef TPMSEC_EMULATION_SERVER_EMULATION_SERVER_H_
#define TPMSEC_EMULATION_SERVER_EMULATION_SERVER_H_

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

#endif  // TPMSEC_EMULATION_SERVER_EMULATION_SERVER_H_
