// --progress / --no-progress: long runs draw progress on stderr when it is a
// terminal or when asked, never otherwise, and never change standard output.
// The tests capture stderr to a file (not a terminal), so what they see does
// not depend on how fast the machine is: the first and the last state are
// always drawn, only the ones between are rate-limited.
#include <gtest/gtest.h>

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

// Progress lines begin with \r[ and end with a newline: no other message is
// glued onto one, and the last one is finished.
void expect_clean_progress(const std::string& err, const std::string& final_text) {
  ASSERT_NE(err.find("\r["), std::string::npos) << "no progress drawn:\n" << err;
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    ASSERT_NE(end, std::string::npos) << "unterminated last line: " << err.substr(start);
    std::string line = err.substr(start, end - start);
    if (line.find('\r') != std::string::npos) {
      EXPECT_EQ(line.rfind("\r[", 0), 0u) << "a message shares the progress line: " << line;
      std::string last = line.substr(line.rfind('\r') + 1);
      EXPECT_NE(last.find(final_text), std::string::npos) << "the last state drawn is " << last;
    }
    start = end + 1;
  }
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
  EXPECT_EQ(quiet.err.find('\r'), std::string::npos) << quiet.err;
  args.push_back("--progress");
  auto shown = run_tpmsec(args, {}, &input);
  ASSERT_EQ(shown.exit_code, 0) << describe(shown);
  expect_clean_progress(shown.err, "[5] extended");
  EXPECT_EQ(shown.out, quiet.out);
  EXPECT_EQ(shown.out.size(), 65u) << shown.out;  // the PCR value: progress never goes to stdout
}

TEST(ProgressTest, BenchDrawsItsLastStateAndStdoutHasNoProgress) {
  std::vector<std::string> args{"bench", "--emulate", "slb9670", "--iterations", "3", "--no-primitives",
                                "--strategies", "resident"};
  auto quiet = run_tpmsec(args);
  ASSERT_EQ(quiet.exit_code, 0) << describe(quiet);
  EXPECT_EQ(quiet.err.find('\r'), std::string::npos) << quiet.err;
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
    EXPECT_EQ(quiet.err.find('\r'), std::string::npos) << quiet.err;
    auto off = args;
    off.push_back("--no-progress");
    auto silenced = run_tpmsec(off);
    ASSERT_EQ(silenced.exit_code, 0) << describe(silenced);
    EXPECT_EQ(silenced.err.find('\r'), std::string::npos) << silenced.err;
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

}  // namespace
}  // namespace tpmsec
