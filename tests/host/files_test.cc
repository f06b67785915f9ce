// The files a root tpmsec writes, attacked as another local user would
// (include/tpmsec/host/files.h; docs/threat-model.md, "Files"): a symlink planted
// in a directory others can write (a 1777 directory, the link owned by
// another uid, as in /tmp), a state directory others can write, a link at a
// state file's name, a write that fails half-way, and every umask.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "support/test_data.h"
#include "tpmsec/host/files.h"

namespace tpmsec {
namespace {

namespace fs = std::filesystem;
using testing::describe;
using testing::run_command;
using testing::run_tpmsec;
using testing::slurp;

constexpr uid_t kOtherUser = 65534;  // nobody: not root, not the caller
constexpr char kDigest[] = "0000000000000000000000000000000000000000000000000000000000000000";

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// Sets the umask for a scope.
class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0u) << "these tests plant files owned by another uid (lchown): run them as root";
    char tmpl[] = "/tmp/tpmsec-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // The victim: a root-only file in a private directory.
    private_ = root_ / "private";
    fs::create_directory(private_);
    ::chmod(private_.c_str(), 0700);
    victim_ = private_ / "victim";
    { std::ofstream(victim_) << kVictimText; }
    ::chmod(victim_.c_str(), 0640);
    // The shared directory: world-writable and sticky, as /tmp.
    shared_ = root_ / "shared";
    fs::create_directory(shared_);
    ::chmod(shared_.c_str(), 01777);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A symlink at shared_/name to `target`, owned by another user.
  fs::path plant(const std::string& name, const fs::path& target) {
    fs::path link = shared_ / name;
    fs::create_symlink(target, link);
    EXPECT_EQ(::lchown(link.c_str(), kOtherUser, kOtherUser), 0);
    return link;
  }

  void expect_victim_untouched() {
    EXPECT_EQ(slurp(victim_), kVictimText);
    EXPECT_EQ(mode_of(victim_), 0640u);
  }

  static std::vector<std::string> entries(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  // Kept state of the CLI runs (session cache), away from /var/lib/tpmsec.
  std::vector<std::string> env() const { return {"TPMSEC_STATE_DIR=" + (root_ / "cli-state").string()}; }

  static constexpr char kVictimText[] = "root:secret:0:0\n";
  fs::path root_, private_, victim_, shared_;
};

// ---- Reports (--json, --svg, -o, ...) ----

// The attack of issue 21: root's `--json /tmp/r.json` where another user put
// r.json -> a root-only file. The link is replaced by the report; the
// victim keeps its content and mode.
TEST_F(FilesTest, APlantedLinkToAFileIsReplacedNeverFollowed) {
  fs::path link = plant("r.json", victim_);
  ASSERT_TRUE(files::write_output(link.string(), "report\n").ok());
  expect_victim_untouched();
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(link)));
  EXPECT_EQ(slurp(link), "report\n");
  EXPECT_EQ(mode_of(link), 0644u);
  EXPECT_EQ(entries(shared_), std::vector<std::string>{"r.json"});  // no temporary file left
}

// A log (the TCTI's log=): appended, one write per block; a new one 0644
// under any umask; a link planted where another user can write is refused,
// never written through.
TEST_F(FilesTest, ALogIsAppendedAndNeverWrittenThroughAPlantedLink) {
  Umask u(0);
  fs::path log = shared_ / "tcti.log";
  ASSERT_TRUE(files::append_output(log.string(), "# one\n").ok());
  ASSERT_TRUE(files::append_output(log.string(), "# two\n").ok());
  EXPECT_EQ(slurp(log), "# one\n# two\n");
  EXPECT_EQ(mode_of(log), 0644u);
  fs::path link = plant("planted.log", victim_);
  Status st = files::append_output(link.string(), "# three\n");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kRuntime);
  EXPECT_EQ(st.error().message().rfind("cannot write " + link.string(), 0), 0u) << st.error().message();
  expect_victim_untouched();
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
}

// The same through the CLI: the cheapest output (an emulated bench's JSON).
TEST_F(FilesTest, BenchJsonThroughAPlantedLinkLeavesTheVictimUnchanged) {
  fs::path link = plant("bench.json", victim_);
  auto r = run_tpmsec({"bench", "--emulate", "slb9670", "--iterations", "2", "--no-primitives", "--strategies",
                       "resident", "--json", link.string(), "--openmetrics", plant("m.txt", victim_).string()},
                      env());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  expect_victim_untouched();
  EXPECT_EQ(nlohmann::json::parse(slurp(link))["schema"], "tpmsec-bench/1");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(shared_ / "m.txt")));
}

// A planted link to a device or FIFO cannot be replaced without writing
// somewhere else than asked, nor followed: refused, before any work (exit 2),
// and nothing reaches the FIFO.
TEST_F(FilesTest, APlantedLinkToAFifoIsRefused) {
  fs::path fifo = private_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // so a wrong open would not block
  ASSERT_GE(reader, 0);
  fs::path link = plant("out.json", fifo);

  auto plan = files::plan_output(link.string());
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(plan.error().message().find("which other users can write, to a device or FIFO: refused"), std::string::npos)
      << plan.error().message();
  Status st = files::write_output(link.string(), "report\n");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kRuntime);

  auto r = run_tpmsec({"bench", "--tpm", "swtpm:host=127.0.0.1,port=1", "--json", link.string()}, env());
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  char buf[64];
  EXPECT_LE(::read(reader, buf, sizeof(buf)), 0);  // nothing was written
  ::close(reader);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
}

// /dev/stdout is a link in /dev (root's, nobody else can write it): followed
// to whatever standard output is.
TEST_F(FilesTest, DevStdoutStillWorks) {
  auto r = run_tpmsec({"bench", "--emulate", "slb9670", "--iterations", "2", "--no-primitives", "--strategies",
                       "resident", "--json", "/dev/stdout"},
                      env());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // The JSON, then the report (which moves to stderr only for "-").
  size_t end = r.out.find("\n}\n");
  ASSERT_NE(end, std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out.substr(0, end + 3))["schema"], "tpmsec-bench/1");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status("/dev/stdout")));
}

// A write that fails half-way (the file size limit) leaves the old file as it
// was, and no temporary file.
TEST_F(FilesTest, AWriteThatFailsHalfWayLeavesTheOldFile) {
  fs::path out = private_ / "report.json";
  { std::ofstream(out) << "old report\n"; }
  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  Status st = files::write_output(out.string(), std::string(65536, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("cannot write " + out.string()), std::string::npos) << st.error().message();
  EXPECT_EQ(slurp(out), "old report\n");
  EXPECT_EQ(entries(private_), (std::vector<std::string>{"report.json", "victim"}));
}

// The CLI killed half-way through writing (SIGXFSZ's default action) leaves
// the old report whole: the partial content only ever went to a temporary
// file.
TEST_F(FilesTest, ACliKilledHalfWayThroughAWriteLeavesTheOldReport) {
  fs::path out = private_ / "chart.svg";
  { std::ofstream(out) << "old chart\n"; }
  auto r = run_command({"sh", "-c", "ulimit -f 1; exec \"$0\" \"$@\"", TPMSEC_CLI_PATH, "bench", "--emulate", "slb9670",
                        "--iterations", "2", "--no-primitives", "--strategies", "resident", "--svg", out.string()},
                       {"TPMSEC_STATE_DIR=" + (root_ / "kept").string()});
  EXPECT_EQ(r.exit_code, 128 + SIGXFSZ) << describe(r);
  EXPECT_EQ(slurp(out), "old chart\n");
  // It was killed writing the chart: the part written is in a temporary file.
  std::vector<std::string> left = entries(private_);
  ASSERT_EQ(left.size(), 3u) << fmt::format("{}", fmt::join(left, " "));
  EXPECT_EQ(left[0].rfind(".chart.svg.tpmsec-", 0), 0u) << left[0];
  EXPECT_GT(fs::file_size(private_ / left[0]), 0u);
}

// A new report is 0644 whatever the umask allows more of; a replaced file
// keeps its mode.
TEST_F(FilesTest, ANewReportIs0644EvenUnderUmask000) {
  Umask none(0);
  fs::path out = private_ / "new.json";
  ASSERT_TRUE(files::write_output(out.string(), "{}\n").ok());
  EXPECT_EQ(mode_of(out), 0644u);
  ::chmod(out.c_str(), 0600);
  ASSERT_TRUE(files::write_output(out.string(), "{}\n").ok());
  EXPECT_EQ(mode_of(out), 0600u);
}

// ---- TPM state and kept secrets ----

// Every file of an embedded TPM's state, and of the state directory after
// `provision` (the bind secret), is 0600 in 0700 directories, under umask
// 022 and 000.
TEST_F(FilesTest, StateFilesAre0600In0700DirectoriesUnderAnyUmask) {
  for (const char* umask : {"022", "000"}) {
    SCOPED_TRACE(std::string("umask ") + umask);
    fs::path dir = root_ / fmt::format("state-{}", umask);
    const std::string tpm = "embedded:state=" + (dir / "tpm").string();
    const std::string env = "TPMSEC_STATE_DIR=" + (dir / "kept").string();
    fs::create_directory(dir);
    ::chmod(dir.c_str(), 0700);
    auto in_umask = [&](std::vector<std::string> args) {
      std::vector<std::string> argv{"sh", "-c", fmt::format("umask {}; exec \"$0\" \"$@\"", umask), TPMSEC_CLI_PATH};
      argv.insert(argv.end(), args.begin(), args.end());
      return run_command(argv, {env});
    };
    auto extended = in_umask({"pcr", "extend", "16", kDigest, "--tpm", tpm});
    ASSERT_EQ(extended.exit_code, 0) << describe(extended);
    auto provisioned = in_umask({"provision", "--tpm", tpm});
    ASSERT_EQ(provisioned.exit_code, 0) << describe(provisioned);
    int files_seen = 0;
    for (const fs::path& top : {dir / "tpm", dir / "kept"}) {
      EXPECT_EQ(mode_of(top), 0700u) << top;
      for (const auto& e : fs::recursive_directory_iterator(top)) {
        const fs::path& p = e.path();
        if (fs::is_directory(fs::symlink_status(p))) {
          EXPECT_EQ(mode_of(p), 0700u) << p;
        } else {
          EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(p))) << p;
          EXPECT_EQ(mode_of(p), 0600u) << p;
          ++files_seen;
        }
      }
    }
    EXPECT_TRUE(fs::exists(dir / "tpm" / "tpmsec-permall.blob"));
    EXPECT_TRUE(fs::is_directory(dir / "kept" / "bind"));
    EXPECT_GE(files_seen, 3);
  }
}

// A link another user planted at the TPM state's file name: not followed
// (the TPM refuses to start: exit 1, one line), its target unchanged.
TEST_F(FilesTest, ALinkAtAStateFileNameIsNotFollowed) {
  fs::path dir = root_ / "tpm";
  fs::create_directory(dir);
  ::chmod(dir.c_str(), 0700);
  fs::path link = dir / "tpmsec-permall.blob";
  fs::create_symlink(victim_, link);
  ASSERT_EQ(::lchown(link.c_str(), kOtherUser, kOtherUser), 0);
  auto r = run_tpmsec({"pcr", "extend", "16", kDigest, "--tpm", "embedded:state=" + dir.string()}, env());
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fmt::format("state file {} (owner uid 65534 (nobody), mode 0777) is a symbolic link, never "
                                   "followed: refused",
                                   link.string())),
            std::string::npos)
      << r.err;
  expect_victim_untouched();
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));

  // Written (the library's state writer), the link is replaced, never followed.
  ASSERT_TRUE(files::write_private({dir.string(), "tpmsec-permall.blob"}, "state").ok());
  expect_victim_untouched();
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(link)));
  EXPECT_EQ(mode_of(link), 0600u);
  // Read, a link is refused.
  fs::path kept = root_ / "kept";
  ASSERT_TRUE(files::make_private_dir({kept.string(), ""}).ok());
  fs::create_symlink(victim_, kept / "pin");
  auto read = files::read_private({kept.string(), "pin"}, 4096);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.error().message().find("a symbolic link"), std::string::npos);
}

// A state directory a group or other users can write (they could swap the
// TPM's seeds or plant links) is refused with one line, exit 1; so is one
// owned by another user. The session stores follow the same rule.
TEST_F(FilesTest, AStateDirectoryOthersCanWriteIsRefused) {
  fs::path dir = root_ / "tpm";
  fs::create_directory(dir);
  for (mode_t mode : {0770, 0777, 01777}) {
    SCOPED_TRACE(fmt::format("{:04o}", mode));
    ::chmod(dir.c_str(), mode);
    auto r = run_tpmsec({"pcr", "extend", "16", kDigest, "--tpm", "embedded:state=" + dir.string()}, env());
    EXPECT_EQ(r.exit_code, 1) << describe(r);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(fmt::format("state directory {} (owner uid 0 (root), mode {:04o}) can be written by group or "
                                     "others: refused",
                                     dir.string(), mode)),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(entries(dir).empty());
    EXPECT_EQ(mode_of(dir), mode);  // refused, not repaired behind the owner's back
  }
  ::chmod(dir.c_str(), 0700);
  ASSERT_EQ(::chown(dir.c_str(), kOtherUser, kOtherUser), 0);
  Status st = files::make_private_dir({dir.string(), ""});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("(owner uid 65534 (nobody), mode 0700) belongs to neither root nor this user"),
            std::string::npos)
      << st.error().message();

  // The kept-secret stores (bind, pins, salt key, session cache).
  fs::path kept = root_ / "kept";
  fs::create_directories(kept / "bind");
  ::chmod((kept / "bind").c_str(), 0775);
  auto r = run_tpmsec({"provision", "--tpm", "embedded:state=" + (root_ / "fresh").string()},
                      {"TPMSEC_STATE_DIR=" + kept.string()});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("can be written by group or others"), std::string::npos) << r.err;
  EXPECT_TRUE(entries(kept / "bind").empty());
}

// An existing state directory others may only read (0755) is narrowed to
// 0700; missing parents are created 0700.
TEST_F(FilesTest, AnExistingReadableStateDirectoryIsNarrowed) {
  Umask none(0);
  fs::path dir = root_ / "readable";
  fs::create_directory(dir);
  ::chmod(dir.c_str(), 0755);
  ASSERT_TRUE(files::write_private({dir.string(), "a/b/secret"}, "s").ok());
  EXPECT_EQ(mode_of(dir / "a"), 0700u);
  EXPECT_EQ(mode_of(dir / "a" / "b"), 0700u);
  EXPECT_EQ(mode_of(dir / "a" / "b" / "secret"), 0600u);
  ASSERT_TRUE(files::make_private_dir({dir.string(), ""}).ok());
  EXPECT_EQ(mode_of(dir), 0700u);
}

}  // namespace
}  // namespace tpmsec
