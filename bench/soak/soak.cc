// bench/soak (issue 39, item 5): `tpmsec serve` as a daemon that runs for
// months. N commands from churning clients of three uids (root, daemon,
// nobody) over both fronts — raw frames on the socket and through Debian's
// tabrmd TCTI on a private D-Bus, and tpm2-tools over D-Bus — objects made,
// loaded and flushed or left behind, sessions saved by one process and
// loaded by another, clients SIGKILLed with a command or half a frame in
// flight, TPM resets and one stall of the TPM, against `tpmsec emulate`.
// serve's RSS and open descriptors and the TPM's handles (asked of the TPM
// directly) are sampled idle after the warm-up (the first tenth) and at the
// end. Exit 1 when RSS grew by more than --max-growth-kib, a descriptor was
// left open, the TPM holds a handle nobody should, or a client went
// unanswered or refused; 2 when the rig did not start.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "soak/driver.h"
#include "soak/rig.h"
#include "soak/verdict.h"

namespace fs = std::filesystem;
using namespace tpmsec::soak;

int main(int argc, char** argv) {
  SoakOptions o;
  RigOptions rig_options{TPMSEC_CLI_PATH, "slb9670", ""};
  long max_growth_kib = 1024;
  bool keep = false, quiet = false;
  CLI::App app{
      "Soak tpmsec serve: churning clients of three uids over both fronts, TPM resets and a stall; "
      "serve's RSS, descriptors and the TPM's handles sampled (run as root)"};
  app.add_option("--commands", o.commands, "Commands the clients send in all")->capture_default_str();
  app.add_option("--clients", o.clients, "Clients at once")->capture_default_str()->check(CLI::Range(1, 12));
  app.add_option("--resets", o.resets, "TPM resets (_TPM_Init) under the running server")->capture_default_str();
  app.add_option("--stall", o.stall_seconds, "Seconds the TPM stops answering, once (0: never)")->capture_default_str();
  app.add_option("--tools-every", o.tools_every, "One tpm2-tools client per this many clients (0: none)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "The workload's random seed")->capture_default_str();
  app.add_option("--max-growth-kib", max_growth_kib, "RSS growth allowed after the warm-up")->capture_default_str();
  app.add_option("--tpmsec", rig_options.cli, "The tpmsec program")->capture_default_str();
  app.add_option("--profile", rig_options.profile, "tpmsec emulate's profile")->capture_default_str();
  app.add_flag("--keep", keep, "Keep the working directory (logs of serve, the emulator and the bus)");
  app.add_flag("-q,--quiet", quiet, "No progress lines");
  CLI11_PARSE(app, argc, argv);
  o.progress = !quiet;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "soak: run as root: the clients take three uids\n");
    return 2;
  }
  char tmpl[] = "/tmp/tpmsec-soak-XXXXXX";
  if (!::mkdtemp(tmpl)) return 2;
  rig_options.dir = tmpl;
  ::chmod(tmpl, 0711);  // the other uids reach the socket
  int code = 2;
  {
    Rig rig;
    std::string error;
    if (!rig.start(rig_options, &error)) {
      std::fprintf(stderr, "soak: %s\n", error.c_str());
      keep = true;
    } else {
      Driver driver(rig, o, rig_options.dir);
      driver.run();
      code = verdict(rig, driver, o, max_growth_kib) ? 0 : 1;
    }
  }
  if (keep || code != 0) {
    std::fprintf(stderr, "soak: logs kept in %s\n", tmpl);
  } else {
    fs::remove_all(tmpl);
  }
  return code;
}
