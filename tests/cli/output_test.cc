// Where the CLI's outputs go: regular files replaced atomically; devices,
// FIFOs and standard output written through; a symlink in the caller's own
// directory followed, never replaced (one planted in a directory others can
// write: files_test); every write checked (exit 1, one line), paths checked
// up front.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/direct_tpm.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/test_data.h"
#include "testing/child_process.h"
#include "tpmsec/constants.h"

namespace tpmsec {
namespace {

using testing::slurp;

using testing::describe;
using testing::run_command;
using testing::run_tpmsec;
namespace fs = std::filesystem;

// A short emulated bench: fast, and it writes every output kind.
std::vector<std::string> bench_args(std::vector<std::string> outputs) {
  std::vector<std::string> args{"bench", "--emulate",       "slb9670",      "--iterations",
                                "2",     "--no-primitives", "--strategies", "resident"};
  args.insert(args.end(), outputs.begin(), outputs.end());
  return args;
}

class OutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tpmsec-output-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Everything in the directory: no temporary file may be left behind.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
  fs::path dir_;
};

TEST_F(OutputTest, RegularFileIsReplacedKeepingItsMode) {
  fs::path json = dir_ / "r.json";
  { std::ofstream(json) << "old"; }
  ::chmod(json.c_str(), 0640);
  auto r = run_tpmsec(bench_args({"--json", json.string()}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(nlohmann::json::parse(slurp(json))["schema"], "tpmsec-bench/1");
  struct stat st {};
  ASSERT_EQ(::stat(json.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(entries(), std::vector<std::string>{"r.json"});
}

TEST_F(OutputTest, SymlinkIsFollowedNotReplaced) {
  fs::path target = dir_ / "target.json", link = dir_ / "link.json";
  { std::ofstream(target) << "old"; }
  fs::create_symlink(target, link);
  auto r = run_tpmsec(bench_args({"--json", link.string()}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(fs::read_symlink(link), target);
  EXPECT_EQ(nlohmann::json::parse(slurp(target))["schema"], "tpmsec-bench/1");
  EXPECT_EQ(entries(), (std::vector<std::string>{"link.json", "target.json"}));
}

TEST_F(OutputTest, FifoIsWrittenThroughAndStaysAFifo) {
  fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto reader = std::async(std::launch::async, [&] { return slurp(fifo); });
  auto r = run_tpmsec(bench_args({"--json", fifo.string()}));
  if (r.exit_code != 0) ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // never leave the reader waiting
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(nlohmann::json::parse(reader.get())["schema"], "tpmsec-bench/1");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(entries(), std::vector<std::string>{"fifo"});
}

TEST_F(OutputTest, DashIsStandardOutputAndTheReportMovesToStandardError) {
  auto r = run_tpmsec(bench_args({"--json", "-"}));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(nlohmann::json::parse(r.out)["schema"], "tpmsec-bench/1");
  EXPECT_NE(r.err.find("recommendation"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists("-"));
}

// A device is written through, never replaced: /dev/full stays the device
// and the failed write is one line, exit 1.
TEST_F(OutputTest, AFullDeviceIsAWriteErrorAndStaysADevice) {
  if (!fs::is_character_file("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  auto r = run_tpmsec(bench_args({"--json", "/dev/full"}));
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("tpmsec: cannot write /dev/full: No space left on device"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
}

TEST_F(OutputTest, StandardOutputThatCannotBeWrittenIsExitOne) {
  for (std::string redirect : {"> /dev/full", ">&-"}) {
    SCOPED_TRACE(redirect);
    auto r = run_command({"sh", "-c", std::string("exec \"$0\" info ") + redirect, TPMSEC_CLI_PATH});
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_NE(r.err.find("tpmsec: cannot write standard output"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// Checked before the TPM is opened: the unreachable TPM would otherwise
// answer with exit 1 (connection refused).
TEST_F(OutputTest, BadOutputPathsAreUsageErrorsBeforeAnyWork) {
  const std::string unreachable = "swtpm:host=127.0.0.1,port=1";
  fs::path json = dir_ / "a.json";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : {Case{{"--json", "/nonexistent/dir/r.json"}, "directory /nonexistent/dir does not exist"},
                        Case{{"--json", dir_.string()}, "is a directory"},
                        Case{{"--json", json.string(), "--svg", json.string()}, "is given for two outputs"},
                        Case{{"--json", "-", "--csv", "-"}, "standard output (-) is given for two outputs"}}) {
    SCOPED_TRACE(c.message);
    std::vector<std::string> args{"bench", "--tpm", unreachable};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = run_tpmsec(args);
    EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  EXPECT_TRUE(entries().empty());
}

// A dangling symlink would fail only after the run (the link is followed,
// never replaced), and /dev/stdout is the same output as "-": both refused
// before the TPM is opened.
TEST_F(OutputTest, DanglingLinkAndStdoutTwiceAreUsageErrorsBeforeAnyWork) {
  const std::string unreachable = "swtpm:host=127.0.0.1,port=1";
  fs::path link = dir_ / "link.json";
  fs::create_symlink(dir_ / "missing" / "r.json", link);
  auto r = run_tpmsec({"bench", "--tpm", unreachable, "--json", link.string()});
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
  EXPECT_NE(r.err.find("a symbolic link to a missing file"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));

  r = run_tpmsec({"bench", "--tpm", unreachable, "--json", "-", "--csv", "/dev/stdout"});
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
  EXPECT_NE(r.err.find("/dev/stdout is given for two outputs"), std::string::npos) << r.err;
}

// Reads `fd` until a line that begins with `prefix` (true), its end or 60 s
// (false); what was read is appended to *seen.
bool read_until_line(int fd, const std::string& prefix, std::string* seen) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  size_t line_start = seen->size();
  for (auto now = std::chrono::steady_clock::now(); now < end; now = std::chrono::steady_clock::now()) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - now).count();
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char c;
    if (::read(fd, &c, 1) != 1) return false;
    *seen += c;
    if (c != '\n') continue;
    if (seen->compare(line_start, prefix.size(), prefix) == 0) return true;
    line_start = seen->size();
  }
  return false;
}

// SIGTERM (systemd stopping a unit) and SIGHUP (a closed terminal) stop a
// bench as Ctrl-C does: it finishes cleanly and leaves nothing on the TPM.
// The signal comes inside the run, with the strategy's session on the TPM:
// once the bench drew its first progress line (--progress on a pipe), which
// it draws after the first extend, with its handler already in place.
TEST(SignalTest, SigtermAndSighupCleanUpAsSigintDoes) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    testing::SwtpmProcess swtpm;
    ASSERT_TRUE(swtpm.start()) << swtpm.error();
    int err[2];
    ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    testing::Child bench;
    bench.pid = testing::spawn_with({TPMSEC_CLI_PATH, "bench", "--tpm", swtpm.tcti(), "--iterations", "1000000",
                                     "--no-primitives", "--strategies", "resident,saved-context", "--progress"},
                                    {}, {null, null, err[1]});
    ::close(null);
    ::close(err[1]);
    ASSERT_GT(bench.pid, 0);
    std::string shown;
    const bool running = read_until_line(err[0], "[", &shown);
    ::kill(bench.pid, running ? sig : SIGKILL);  // a bench that never drew its line is not waited for
    // To its end (it ends once interrupted): a closed pipe would stop it with SIGPIPE at its next line.
    char buf[4096];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof(buf))) > 0;) shown.append(buf, static_cast<size_t>(n));
    ::close(err[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(bench.pid, &status, 0), bench.pid);
    bench.pid = -1;
    ASSERT_TRUE(running) << "no progress line before the bench ended, status " << status << ": " << shown;
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 1) << shown;
    EXPECT_NE(shown.find("interrupted"), std::string::npos) << shown;
    testing::Direct direct(swtpm.spec());
    ASSERT_TRUE(direct.ok());
    for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstPolicySession}) {
      auto left = direct.tpm().list_handles(first);
      ASSERT_TRUE(left.ok()) << left.error().message();
      for (uint32_t h : *left) {
        if ((h >> 24) == (first >> 24)) ADD_FAILURE() << fmt::format("handle 0x{:08x} left on the TPM", h);
      }
    }
  }
}

}  // namespace
}  // namespace tpmsec
