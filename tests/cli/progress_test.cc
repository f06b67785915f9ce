// --progress / --no-progress: long runs draw progress on stderr when it is a
// terminal or when asked, never otherwise, and never change standard output.
// The tests capture stderr to a file (not a terminal), so what they see does
// not depend on how fast the machine is: the first and the last state are
// always drawn, only the ones between are rate-limited.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/log_builder.h"
#include "support/run_command.h"

namespace tpmsec {
namespace {

using testing::describe;
using testing::run_tpmsec;
namespace fs = std::filesystem;

// Standard error here is a pipe, as a log is: progress comes as whole lines
// beginning with [ (never a \r, which a log shows as one endless line), no
// other message is glued onto one, and the last one drawn is the final state.
void expect_clean_progress(const std::string& err, const std::string& final_text) {
  EXPECT_EQ(err.find('\r'), std::string::npos) << "a carriage return in a log:\n" << err;
  ASSERT_EQ(err.empty() ? '\n' : err.back(), '\n') << "unterminated last line: " << err;
  std::string last;
  size_t start = 0, lines = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    std::string line = err.substr(start, end - start);
    if (line.rfind("[", 0) == 0) {
      last = line;
      ++lines;
      EXPECT_EQ(line.find("tpmsec:"), std::string::npos) << "a message shares the progress line: " << line;
    }
    start = end + 1;
  }
  ASSERT_GT(lines, 0u) << "no progress drawn:\n" << err;
  EXPECT_NE(last.find(final_text), std::string::npos) << "the last state drawn is " << last;
}

// No progress at all: neither a redrawn line nor a logged one.
void expect_no_progress(const std::string& err) {
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  EXPECT_NE(err.rfind("[", 0), 0u) << err;
  EXPECT_EQ(err.find("\n["), std::string::npos) << err;
}

std::string digests(int n) {
  std::string in;
  for (int i = 0; i < n; ++i) in += std::string(64, "0123456789abcdef"[i % 16]) + "\n";
  return in;
}

TEST(ProgressTest, BatchExtendCountsOnlyWhenAskedAndStdoutIsUnchanged) {
  std::string input = digests(5);
  std::vector<std::string> args{"pcr", "extend", "16", "-", "--strategy", "resident", "--read-back"};
  auto quiet = run_tpmsec(args, {}, &input);
  ASSERT_EQ(quiet.exit_code, 0) << describe(quiet);
  expect_no_progress(quiet.err);
  args.push_back("--progress");
  auto shown = run_tpmsec(args, {}, &input);
  ASSERT_EQ(shown.exit_code, 0) << describe(shown);
  expect_clean_progress(shown.err, "[5] extended");
  EXPECT_EQ(shown.out, quiet.out);
  EXPECT_EQ(shown.out.size(), 65u) << shown.out;  // the PCR value: progress never goes to stdout
}

TEST(ProgressTest, BenchDrawsItsLastStateAndStdoutHasNoProgress) {
  std::vector<std::string> args{"bench", "--emulate",       "slb9670",      "--iterations",
                                "3",     "--no-primitives", "--strategies", "resident"};
  auto quiet = run_tpmsec(args);
  ASSERT_EQ(quiet.exit_code, 0) << describe(quiet);
  expect_no_progress(quiet.err);
  args.push_back("--progress");
  auto shown = run_tpmsec(args);
  ASSERT_EQ(shown.exit_code, 0) << describe(shown);
  expect_clean_progress(shown.err, "100%");
  EXPECT_EQ(shown.out.find('\r'), std::string::npos);
  EXPECT_NE(shown.out.find("recommendation"), std::string::npos) << shown.out;
}

TEST(ProgressTest, CalibrateReplayAndPredictTakeTheFlags) {
  char tmpl[] = "/tmp/tpmsec-progress-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  fs::path dir = tmpl;
  fs::path log = dir / "ascii_runtime_measurements";
  std::vector<testing::ImaRecord> records;
  for (int i = 0; i < 4; ++i) records.push_back(testing::sample_ima_record("ima-ng", i));
  std::ofstream(log, std::ios::binary) << testing::ima_ascii_log(records);
  for (std::vector<std::string> args :
       {std::vector<std::string>{"policy", "calibrate", "--emulate", "slb9670", "--iterations", "2", "--max-seconds",
                                 "600"},
        std::vector<std::string>{"replay", "--emulate", "slb9670", "--ima", log.string(), "--strategy", "resident"},
        std::vector<std::string>{"predict", "--ima", log.string(), "--profiles", "slb9670", "--strategies",
                                 "resident"}}) {
    SCOPED_TRACE(args[0]);
    auto quiet = run_tpmsec(args);
    ASSERT_EQ(quiet.exit_code, 0) << describe(quiet);
    expect_no_progress(quiet.err);
    auto off = args;
    off.push_back("--no-progress");
    auto silenced = run_tpmsec(off);
    ASSERT_EQ(silenced.exit_code, 0) << describe(silenced);
    expect_no_progress(silenced.err);
    args.push_back("--progress");
    auto shown = run_tpmsec(args);
    ASSERT_EQ(shown.exit_code, 0) << describe(shown);
    expect_clean_progress(shown.err, "100%");
    EXPECT_EQ(shown.out.find('\r'), std::string::npos);
    args.push_back("--no-progress");
    EXPECT_EQ(run_tpmsec(args).exit_code, testing::kExitUsage);
  }
  fs::remove_all(dir);
}

// Into a log, lines come at a low rate: the first, the last, and at most
// one per ProgressBar::kLogPeriod (10 s) of real time between them, however
// many extends there are (here 600, each of which reports).
TEST(ProgressTest, ALogGetsFewWholeLines) {
  std::vector<std::string> args{"bench",           "--emulate",    "slb9670",  "--iterations", "300",
                                "--no-primitives", "--strategies", "resident", "--progress"};
  auto started = std::chrono::steady_clock::now();
  auto shown = run_tpmsec(args);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(shown.exit_code, 0) << describe(shown);
  expect_clean_progress(shown.err, "100%");
  size_t lines = 0;
  for (size_t at = 0; (at = shown.err.find("% ", at)) != std::string::npos; ++at) ++lines;
  EXPECT_LE(lines, 2 + static_cast<size_t>(seconds / 10) + 1) << shown.err;
}

// On a terminal the line is redrawn by time, also while no extend ends: a
// batch that waits 2 s for its next digest shows its line redrawn several
// times meanwhile (every 200 ms; 3 is far below what even a slow machine does).
TEST(ProgressTest, ATerminalIsRedrawnByTimeBetweenUpdates) {
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  int in[2];
  ASSERT_EQ(::pipe(in), 0);
  std::string state = ::testing::TempDir() + "tpmsec-progress-pty-state";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(slave, 2);
    ::close(in[1]);
    ::close(master);
    ::setenv("TPMSEC_TPM", "embedded", 1);
    ::setenv("TPMSEC_STATE_DIR", state.c_str(), 1);
    ::execl(TPMSEC_CLI_PATH, TPMSEC_CLI_PATH, "pcr", "extend", "16", "-", "--strategy", "resident", "--progress",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  ::close(in[0]);
  ::close(slave);
  std::string out;
  auto read_for = [&](std::chrono::milliseconds span) {
    auto until = std::chrono::steady_clock::now() + span;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      pollfd p{master, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(master, buf, sizeof(buf));
      if (n <= 0) return;
      out.append(buf, static_cast<size_t>(n));
    }
  };
  // Two lines: the batch reads one ahead, so the first is extended once the
  // second is in, and it then waits for the third.
  std::string first = std::string(64, 'a') + "\n" + std::string(64, 'c') + "\n";
  ASSERT_EQ(::write(in[1], first.data(), first.size()), static_cast<ssize_t>(first.size()));
  // The first extend (the session's set-up included) and 2 s of waiting.
  read_for(std::chrono::milliseconds(2000));
  size_t before = out.size();
  std::string second = std::string(64, 'b') + "\n";
  ASSERT_EQ(::write(in[1], second.data(), second.size()), static_cast<ssize_t>(second.size()));
  ::close(in[1]);
  read_for(std::chrono::milliseconds(30000));  // to the end (EIO once the child exits)
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(master);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  size_t redraws = 0;
  for (size_t at = 0; (at = out.find("\r[1] extended", at)) != std::string::npos && at < before; ++at) ++redraws;
  EXPECT_GE(redraws, 3u) << out;
  EXPECT_NE(out.find("extended 3 digests"), std::string::npos) << out;
  fs::remove_all(state);
}

}  // namespace
}  // namespace tpmsec
