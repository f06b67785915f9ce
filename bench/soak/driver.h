// The soak's schedule (bench/soak): churning clients of three uids over both
// fronts of a running `tpmsec serve`, a warm-up, TPM resets and a stall
// under them, and what it counted and sampled.
#ifndef TPMSEC_BENCH_SOAK_DRIVER_H_
#define TPMSEC_BENCH_SOAK_DRIVER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "soak/rig.h"
#include "soak/scripts.h"

namespace tpmsec::soak {

struct SoakOptions {
  uint64_t commands = 1000000;
  int clients = 6;  // at once
  int resets = 3;
  int stall_seconds = 10;
  int tools_every = 40;  // one tpm2-tools run per this many clients (0: none)
  uint32_t seed = 1;
  bool progress = true;
};

struct Sample {
  long rss_kib = -1, fds = -1;
  TpmHandles handles;
  bool handles_read = false;
  bool quiet = true;  // an idle sample: serve counted no client but the bench's own
};

struct Tally {
  uint64_t sent = 0, answered = 0, unanswered = 0, refused = 0, clients = 0, killed = 0;
  uint64_t tool_runs = 0, tool_failures = 0;
  std::map<uint32_t, uint64_t> errors;      // response code -> count
  std::map<std::string, uint64_t> scripts;  // client kind -> count
  std::map<int, uint64_t> tool_exits;       // a tool's non-zero exit code -> count
  uint64_t resets = 0, resets_failed = 0, stalls = 0;
};

class Driver {
 public:
  Driver(Rig& rig, SoakOptions options, std::string dir);
  // Warm-up, the run with its resets and stall, the end; the samples taken idle.
  void run();
  const Tally& tally() const { return tally_; }
  const Sample& warm() const { return warm_; }
  const Sample& end() const { return end_; }
  double seconds() const { return seconds_; }

 private:
  struct Running {
    int report_fd = -1;
    uid_t uid = 0;
    bool tool = false;
    Script script = Script::kReads;
  };
  void run_until(uint64_t planned_commands, uint64_t events_from);
  void launch();
  void launch_tool(uid_t uid);
  Plan next_plan(uid_t uid);
  void reap();
  void account(const Running& r, int status);
  void events(uint64_t from);
  void drain_saved_sessions();
  Sample sample(bool idle);
  void progress_line();

  Rig& rig_;
  SoakOptions o_;
  std::string dir_;
  std::mt19937 rng_;
  std::map<pid_t, Running> running_;
  std::map<uid_t, std::vector<Bytes>> saved_;  // contexts a client saved, for a later one of the uid
  std::map<uid_t, bool> tool_session_;         // a tool saved a session file the next tool loads
  uint64_t planned_ = 0, launched_ = 0, next_progress_ = 0;
  int resets_done_ = 0;
  bool stalled_ = false;
  Tally tally_;
  Sample warm_, end_;
  double seconds_ = 0;
};

}  // namespace tpmsec::soak

#endif  // TPMSEC_BENCH_SOAK_DRIVER_H_
