// `tpmsec emulate PROFILE --port P`: the arguments and the printing; the
// server is the library's (tpmsec-server/emulator_server/emulation_server.h, src/emulator_server).
#include <fmt/format.h>

#include "cli.h"
#include "progress.h"
#include "tpmsec-server/emulator_server/emulation_server.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/profile_summary.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec::cli {
namespace emulate_cmd {

struct Options {
  std::string profile, state, json, trace;
  std::string clock = "real";
  std::string protocol = "swtpm";
  EmulationServerOptions server;
};

Status run(Options o) {
  if (o.clock != "real" && o.clock != "virtual") {
    return usage_error(fmt::format("emulate: --clock must be real or virtual, got '{}'", o.clock));
  }
  if (o.protocol != "swtpm" && o.protocol != "mssim") {
    return usage_error(fmt::format("emulate: --protocol must be swtpm or mssim, got '{}'", o.protocol));
  }
  if ((o.server.port != 0) == !o.server.ctrl_unix.empty()) {
    return usage_error("emulate: give --port P (TCP) or --ctrl-unix PATH (qemu's tpm-emulator), one of them");
  }
  if (!o.server.ctrl_unix.empty() && o.protocol != "swtpm") {
    return usage_error("emulate: --ctrl-unix speaks swtpm's control protocol, not --protocol mssim");
  }
  TPMSEC_RETURN_IF_ERROR(check_outputs({o.json, o.trace}));
  auto profile = load_profile(o.profile);
  if (!profile.ok()) return input_file_error(profile.error());
  if (std::string w = provenance_warning(*profile); !w.empty()) fmt::print(stderr, "tpmsec: warning: {}\n", w);
  o.server.real_clock = o.clock == "real";
  o.server.protocol = o.protocol == "mssim" ? ServerProtocol::kMssim : ServerProtocol::kSwtpm;
  o.server.keep_records = !o.json.empty() || !o.trace.empty();
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> tpm, open_embedded(o.state));
  StopOnInterrupt interrupt;
  TPMSEC_ASSIGN_OR_RETURN(auto server,
                          EmulationServer::start(o.server, std::move(*profile), std::move(tpm), interrupt.flag()));
  Status served = server->run();
  fmt::print(stderr, "{}", server->totals());
  BenchResult r = server->result();
  if (!o.json.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.json, bench_json(r).dump(2) + "\n"));
  if (!o.trace.empty()) TPMSEC_RETURN_IF_ERROR(write_file(o.trace, bench_trace(r).dump() + "\n"));
  return served;
}

}  // namespace emulate_cmd

void register_emulate(CLI::App& app, Action* action) {
  auto o = std::make_shared<emulate_cmd::Options>();
  CLI::App* sub = app.add_subcommand(
      "emulate",
      "Serve a profiled TPM chip to any TPM stack: the embedded libtpms on swtpm's TCP protocol (data port P, "
      "control port P+1; tpm2-tss TCTI swtpm:host=H,port=P, tpmsec --tpm swtpm:host=H,port=P,ctrl=P+1) or mssim's, "
      "or to a virtual machine's TPM (qemu's tpm-emulator backend, --ctrl-unix), "
      "reporting the profile's identity and taking its latency on every command");
  sub->add_option("PROFILE", o->profile, "Latency profile: a name (see tpmsec profiles) or a path")->required();
  sub->add_option("--port", o->server.port, "Data port P; the control (swtpm) or platform (mssim) port is P+1");
  sub->add_option("--ctrl-unix", o->server.ctrl_unix,
                  "Instead of --port: swtpm's control channel on this Unix socket (created 0600), as `swtpm socket "
                  "--ctrl type=unixio,path=PATH`, for qemu's tpm-emulator backend: -chardev "
                  "socket,id=chrtpm,path=PATH -tpmdev emulator,id=tpm0,chardev=chrtpm -device tpm-tis,tpmdev=tpm0. "
                  "qemu hands over the data channel (CMD_SET_DATAFD); the guest's TPM driver then talks to this chip");
  sub->add_option("--host", o->server.host, "Address to listen on")->capture_default_str();
  sub->add_option("--state", o->state,
                  "Keep the TPM's NV state in DIR (as embedded:state=DIR); default: in memory, fresh per run");
  sub->add_option("--clock", o->clock,
                  "real: each response waits out the modelled time, as on the chip; virtual: answer at once and "
                  "only account the modelled time")
      ->capture_default_str();
  sub->add_option("--protocol", o->protocol, "swtpm (swtpm socket --server/--ctrl type=tcp) or mssim")
      ->capture_default_str();
  sub->add_flag("--means", o->server.means, "Model every command at the profile's mean (no jitter, no tail events)");
  sub->add_flag("--private-handles", o->server.private_handles,
                "As /dev/tpmrm0 and tpm2-abrmd: each data connection gets a handle space of its own (virtual "
                "object handles; objects and sessions swapped out when another client needs their slot, loaded "
                "again when it names them; listings show its own handles only; another "
                "client's handles are refused). What a closing client left is flushed; a session it saved "
                "itself stays for a later client of the same peer. These ContextSave, ContextLoad and "
                "FlushContext commands are billed and logged. Clients may then skip their handle listing "
                "(tpmsec and its TCTI: swtpm:...,handles=private or mssim:...,handles=private). A tpm2-tss program "
                "straight to the server: --protocol mssim and tpm2-tss's mssim: TCTI (one connection per context); "
                "tpm2-tss's swtpm: TCTI connects per command, so its handles go with each connection");
  sub->add_option("--json", o->json,
                  "On exit, write the per-command modelled times as a bench result (tpmsec compare)");
  sub->add_option("--trace", o->trace, "On exit, write the commands as Chrome trace events (Perfetto)");
  sub->add_flag("-q,--quiet", o->server.quiet, "No line per command on stderr");
  sub->footer(
      "Several clients at once on each port; their commands run one at a time, as on one chip. A client that "
      "stops in the middle of a frame for 5 s is dropped, and never holds up the others. Stops on SIGINT, "
      "SIGTERM or the control channel's CMD_SHUTDOWN (mssim: TPM_STOP), then prints per-command totals and writes "
      "--json/--trace (the first 100000 commands). A GetCapability answer in a session (an audited identity read) "
      "reports the real libtpms identity: its HMAC covers it.");
  sub->callback([o, action] { *action = [o] { return emulate_cmd::run(*o); }; });
}

}  // namespace tpmsec::cli
