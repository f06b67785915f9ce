#include "soak/driver.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

namespace tpmsec::soak {
namespace {

namespace fs = std::filesystem;
constexpr uid_t kUids[] = {0, 1, 65534};  // root, daemon, nobody
constexpr gid_t kNogroup = 65534;

// The commands a plan sends when nothing fails.
uint64_t planned_commands(const Plan& p) {
  switch (p.script) {
    case Script::kReads:
      return p.rounds;
    case Script::kObjects:
      return 2 + 3ull * p.rounds;
    case Script::kObjectsLeft:
      return 1 + 3ull * p.rounds - 1;
    case Script::kSaveSession:
    case Script::kLoadSession:
      return 2;
    case Script::kKilledInCommand:
      return 2;
    case Script::kKilledInFrame:
      return 1;
  }
  return 1;
}

}  // namespace

Driver::Driver(Rig& rig, SoakOptions options, std::string dir)
    : rig_(rig), o_(options), dir_(std::move(dir)), rng_(options.seed) {
  for (uid_t uid : kUids) {
    const std::string home = dir_ + "/home-" + std::to_string(uid);
    fs::create_directories(home);
    (void)!::chown(home.c_str(), uid, kNogroup);
  }
}

void Driver::run() {
  auto start = std::chrono::steady_clock::now();
  const uint64_t warmup = o_.commands / 10;
  run_until(warmup, UINT64_MAX);
  warm_ = sample(true);
  run_until(o_.commands, warmup);
  drain_saved_sessions();
  end_ = sample(true);
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Clients launched until `planned_commands` are planned, then every one reaped.
void Driver::run_until(uint64_t planned_commands, uint64_t events_from) {
  while (true) {
    while (static_cast<int>(running_.size()) < o_.clients && planned_ < planned_commands) launch();
    if (running_.empty()) return;
    reap();
    if (planned_ >= events_from) events(events_from);
    if (o_.progress && tally_.sent >= next_progress_) progress_line();
  }
}

Plan Driver::next_plan(uid_t uid) {
  Plan p;
  p.uid = uid;
  p.front = (launched_ / 3) % 2 ? Front::kDbus : Front::kSocket;
  auto& saved = saved_[uid];
  if (!saved.empty()) {  // a session another process of the uid saved: loaded next
    p.script = Script::kLoadSession;
    p.context = std::move(saved.front());
    saved.erase(saved.begin());
    return p;
  }
  uint32_t r = rng_() % 100;
  p.script = r < 50   ? Script::kReads
             : r < 75 ? Script::kObjects
             : r < 82 ? Script::kObjectsLeft
             : r < 92 ? Script::kSaveSession
             : r < 96 ? Script::kKilledInCommand
                      : Script::kKilledInFrame;
  p.rounds = p.script == Script::kReads ? 20 + rng_() % 181 : 2 + rng_() % 11;
  return p;
}

void Driver::launch() {
  const uid_t uid = kUids[launched_ % 3];
  ++launched_;
  if (o_.tools_every > 0 && launched_ % static_cast<uint64_t>(o_.tools_every) == 0) return launch_tool(uid);
  Plan plan = next_plan(uid);
  Running r;
  r.uid = uid;
  r.script = plan.script;
  pid_t pid = start_client(plan, rig_.socket(), &r.report_fd);
  if (pid <= 0) return;
  planned_ += planned_commands(plan);
  running_[pid] = r;
}

// One tpm2-tools program over D-Bus: a read, a primary saved to a file, or a
// session saved by one process (tpm2_startauthsession -S) and loaded and
// flushed by the uid's next one (tpm2_flushcontext).
void Driver::launch_tool(uid_t uid) {
  const std::string home = dir_ + "/home-" + std::to_string(uid);
  std::vector<std::string> argv;
  bool& session = tool_session_[uid];
  if (session) {
    argv = {"tpm2_flushcontext", home + "/session.ctx"};
    session = false;
  } else {
    switch ((launched_ / static_cast<uint64_t>(o_.tools_every)) % 4) {
      case 0:
        argv = {"tpm2_getrandom", "--hex", "8"};
        break;
      case 1:
        argv = {"tpm2_pcrread", "sha256:0,1,2"};
        break;
      case 2:
        argv = {"tpm2_createprimary", "-C", "o", "-c", home + "/primary.ctx"};
        break;
      default:
        argv = {"tpm2_startauthsession", "-S", home + "/session.ctx"};
        session = true;
    }
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    // Its output dropped, its errors kept (tools.log in the working directory, --keep).
    int null = ::open("/dev/null", O_WRONLY),
        log = ::open((dir_ + "/tools.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(null, 1);
    ::dup2(log, 2);
    std::string line = "uid " + std::to_string(uid) + ":";
    for (const auto& a : argv) line += " " + a;
    line += "\n";
    (void)!::write(2, line.data(), line.size());
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNogroup) != 0 || ::setuid(uid) != 0) ::_exit(126);
    ::setenv("TPM2TOOLS_TCTI", "tabrmd:bus_type=session", 1);
    ::setenv("HOME", home.c_str(), 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  if (pid > 0) running_[pid] = Running{-1, uid, true, Script::kReads};
}

void Driver::reap() {
  int status = 0;
  pid_t pid = ::waitpid(-1, &status, 0);
  auto it = running_.find(pid);
  if (it == running_.end()) return;
  Running r = it->second;
  running_.erase(it);
  account(r, status);
}

void Driver::account(const Running& r, int status) {
  if (r.tool) {
    ++tally_.tool_runs;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0) {
      ++tally_.tool_failures;
      ++tally_.tool_exits[code];
    }
    return;
  }
  Report rep = read_report(r.report_fd);
  ++tally_.clients;
  ++tally_.scripts[script_name(r.script)];
  if (WIFSIGNALED(status)) ++tally_.killed;
  tally_.sent += rep.sent;
  tally_.answered += rep.answered;
  tally_.unanswered += rep.unanswered;
  tally_.refused += rep.refused;
  for (int i = 0; i < Report::kKinds && rep.rc_counts[i]; ++i) tally_.errors[rep.rcs[i]] += rep.rc_counts[i];
  if (rep.rc_overflow) tally_.errors[0xFFFFFFFFu] += rep.rc_overflow;
  if (rep.context_size) saved_[r.uid].emplace_back(rep.context, rep.context + rep.context_size);
}

// The resets spread over the run after the warm-up, the stall between the
// first two: each while clients are in the middle of their commands.
void Driver::events(uint64_t from) {
  const uint64_t span = o_.commands - from;
  if (resets_done_ < o_.resets && planned_ >= from + span * (resets_done_ + 1) / (o_.resets + 1)) {
    ++resets_done_;
    ++(rig_.reset_tpm() ? tally_.resets : tally_.resets_failed);
    if (o_.progress)
      std::fprintf(stderr, "soak: TPM reset %d at %llu commands\n", resets_done_,
                   static_cast<unsigned long long>(tally_.sent));
  }
  if (!stalled_ && o_.stall_seconds > 0 && planned_ >= from + span * 3 / 8) {
    stalled_ = true;
    ++tally_.stalls;
    if (o_.progress) std::fprintf(stderr, "soak: the TPM stops answering for %d s\n", o_.stall_seconds);
    rig_.stall_tpm(o_.stall_seconds);
  }
}

// Every context still waiting for its loader is loaded (and flushed) now.
void Driver::drain_saved_sessions() {
  for (int round = 0; round < 2; ++round) {
    for (uid_t uid : kUids) {
      while (!saved_[uid].empty()) {
        Plan p = next_plan(uid);
        Running r{-1, uid, false, p.script};
        pid_t pid = start_client(p, rig_.socket(), &r.report_fd);
        if (pid > 0) running_[pid] = r;
        while (static_cast<int>(running_.size()) >= o_.clients) reap();
      }
    }
    while (!running_.empty()) reap();
  }
}

Sample Driver::sample(bool idle) {
  auto held = idle ? rig_.only_client() : nullptr;
  Sample s;
  s.quiet = !idle || held != nullptr;
  s.rss_kib = rig_.rss_kib();
  s.fds = rig_.open_fds();
  if (auto h = rig_.tpm_handles()) {
    s.handles = *h;
    s.handles_read = true;
  }
  return s;
}

void Driver::progress_line() {
  next_progress_ = tally_.sent + std::max<uint64_t>(o_.commands / 20, 1);
  Sample s = sample(false);
  std::fprintf(stderr, "soak: %llu/%llu commands, %llu clients, serve RSS %.1f MiB, %ld fds, TPM handles %s\n",
               static_cast<unsigned long long>(tally_.sent), static_cast<unsigned long long>(o_.commands),
               static_cast<unsigned long long>(tally_.clients), s.rss_kib / 1024.0, s.fds,
               s.handles_read ? std::to_string(s.handles.total()).c_str() : "(no answer)");
}

}  // namespace tpmsec::soak
