// The tpmsec CLI and TCTI as clients of a tpmsec server (serve:path=SOCKET):
// a real `tpmsec serve --tpm embedded --socket PATH` in its own process, real
// `tpmsec pcr extend`/`random` and real tpm2-tools loading the tpmsec TCTI by
// path. The clients start no session of their own: the server's per-command
// counts (serve -v, printed as it stops) list every command code a client
// sent — no StartAuthSession from the CLI, and from tpm2-tools only those
// the tools sent themselves (the TCTI's log=) — while the server's own
// session went on every one. A socket served by a user who is neither root
// nor the server's user is refused before a byte is sent, and a hostile
// server's response sizes are bounded.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/run_command.h"
#include "support/serve_process.h"
#include "support/test_data.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec {
namespace {

using testing::CommandResult;
using testing::describe;
using testing::run_command;
using testing::run_tpmsec;

const std::string kDigest(64, 'a');  // a SHA-256 digest in hex

std::string temp_dir() { return testing::make_temp_dir("tpmsec-serve-client"); }

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `tpmsec serve --tpm embedded --dbus none -v` in DIR (support/serve_process.h).
class Serve : public testing::ServeProcess {
 public:
  explicit Serve(const std::string& dir) : ServeProcess(dir) {}
  // True once it listens; `prefix` runs it under another program (setpriv).
  bool start(const std::vector<std::string>& prefix = {}) {
    return ServeProcess::start({"--allow-root", "--tpm", "embedded", "--dbus", "none", "-v"}, {}, false, prefix) &&
           wait_serving();
  }
  // SIGTERM, then what it printed (its per-command counts among it).
  std::string stop_for_log() {
    stop();
    return log();
  }
  bool exited_cleanly() const { return exit_code() == 0; }
};

// The sum of the first group of every match of `pattern` in `text`.
uint64_t sum_of(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  uint64_t sum = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    sum += std::stoull((*it)[1]);
  }
  return sum;
}

// The TPM string for a server this process started: root's is trusted as
// is; any other user's is named (uid=), which is the point of the item.
std::string serve_string(const std::string& socket) {
  std::string s = "serve:path=" + socket;
  if (::getuid() != 0) s += ",uid=" + std::to_string(::getuid());
  return s;
}

// The client command codes in the server's counts that are StartAuthSession
// (0x176): a line "StartAuthSession 0x00000176 ..." means a client sent one.
bool client_started_session(const std::string& serve_log) {
  return serve_log.find(" 0x00000176 ") != std::string::npos;
}

class ServeClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    ASSERT_FALSE(dir_.empty());
    state_ = dir_ + "/client-state";
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::vector<std::string> env() const { return {"TPMSEC_STATE_DIR=" + state_}; }

  std::string dir_, state_;
};

TEST_F(ServeClientTest, CliExtendsAndReadsRandomThroughTheServerWithNoSessionOfItsOwn) {
  Serve serve(dir_);
  ASSERT_TRUE(serve.start()) << serve.log();
  const std::string tpm = serve_string(serve.socket());

  CommandResult ext = run_tpmsec({"pcr", "extend", "16", kDigest, "--tpm", tpm, "-v"}, env());
  EXPECT_EQ(ext.exit_code, 0) << describe(ext);
  EXPECT_NE(ext.err.find("this process starts none"), std::string::npos) << describe(ext);
  CommandResult rnd = run_tpmsec({"random", "8", "--tpm", tpm}, env());
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd);
  EXPECT_EQ(rnd.out.size(), 17u) << describe(rnd);  // 16 hex digits and a newline
  // The extend landed: PCR 16 is SHA-256(zeros || digest), read through the server.
  CommandResult read = run_tpmsec({"pcr", "read", "16", "--tpm", tpm}, env());
  EXPECT_EQ(read.exit_code, 0) << describe(read);
  EXPECT_NE(read.out.find("9ef814b42fa0be12d197c44d3e8e03441a4b1118237658368ba1351090e556ed"), std::string::npos)
      << describe(read);

  // The null key's name, through the server's session: 68 hex digits.
  CommandResult null_key = run_tpmsec({"null-key", "--tpm", tpm}, env());
  EXPECT_EQ(null_key.exit_code, 0) << describe(null_key);
  EXPECT_EQ(null_key.out.size(), 69u) << describe(null_key);

  const std::string log = serve.stop_for_log();
  EXPECT_TRUE(serve.exited_cleanly()) << log;
  // The clients' commands were the server's to wrap: PCR_Extend and
  // GetRandom each wrapped, no StartAuthSession from a client.
  EXPECT_NE(log.find("PCR_Extend 0x00000182 wrapped=1"), std::string::npos) << log;
  EXPECT_NE(log.find("GetRandom 0x0000017b wrapped=1 encrypted=1"), std::string::npos) << log;
  EXPECT_FALSE(client_started_session(log)) << log;
}

// `serve --emulate PROFILE`: the chip played behind the profile's latency
// model, opened as every TPM is (open_transport()) with the measured
// transport over it. Every command the server sent, its session's start and
// its flush at the end included, is counted on the virtual clock: more than
// the salted StartAuthSession alone, which the SLB9670's profile models at
// about 85 ms (the seed thread's chip), and whatever the host's speed.
TEST_F(ServeClientTest, AnEmulatedChipCountsEveryCommandOnItsVirtualClock) {
  Serve serve(dir_);
  ASSERT_TRUE(
      serve.ServeProcess::start({"--allow-root", "--tpm", "embedded", "--emulate", "slb9670", "--dbus", "none"}) &&
      serve.wait_serving())
      << serve.log();
  CommandResult rnd = run_tpmsec({"random", "8", "--tpm", serve_string(serve.socket())}, env());
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd);
  const std::string log = serve.stop_for_log();
  EXPECT_TRUE(serve.exited_cleanly()) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(emulated slb9670: ([0-9]+) TPM commands took ([0-9.]+) ms)")))
      << log;
  EXPECT_GE(std::stoi(m[1]), 3) << log;  // the session's start, the GetRandom, the flush
  EXPECT_GT(std::stod(m[2]), 80.0) << log;
}

TEST_F(ServeClientTest, AnAnchorAStrategyOrAnEncryptionGivenToAClientIsRefused) {
  Serve serve(dir_);
  ASSERT_TRUE(serve.start()) << serve.log();
  const std::string tpm = serve_string(serve.socket());
  CommandResult tofu = run_tpmsec({"random", "8", "--tpm", tpm + ",tofu"}, env());
  EXPECT_EQ(tofu.exit_code, testing::kExitUsage) << describe(tofu);
  EXPECT_NE(tofu.err.find("give tofu to `tpmsec serve`"), std::string::npos) << describe(tofu);
  CommandResult xored = run_tpmsec({"random", "8", "--xor", "--tpm", tpm}, env());
  EXPECT_EQ(xored.exit_code, testing::kExitUsage) << describe(xored);
  CommandResult strategy =
      run_tpmsec({"pcr", "extend", "16", kDigest, "--tpm", tpm, "--strategy", "per-command"}, env());
  EXPECT_EQ(strategy.exit_code, testing::kExitUsage) << describe(strategy);
  const std::string log = serve.stop_for_log();
  EXPECT_FALSE(client_started_session(log)) << log;
  EXPECT_EQ(log.find("PCR_Extend"), std::string::npos) << log;  // refused before any extend
}

TEST_F(ServeClientTest, Tpm2ToolsThroughTheTctiPassFramesToTheServer) {
  Serve serve(dir_);
  ASSERT_TRUE(serve.start()) << serve.log();
  const std::string tcti =
      std::string(TPMSEC_TCTI_PATH) + ":" + serve_string(serve.socket()) + ",log=" + dir_ + "/tcti.log";
  std::vector<std::string> e = env();
  e.push_back("TPM2TOOLS_TCTI=" + tcti);

  CommandResult ext = run_command({"tpm2_pcrextend", "16:sha256=" + kDigest}, e);
  EXPECT_EQ(ext.exit_code, 0) << describe(ext);
  CommandResult rnd = run_command({"tpm2_getrandom", "--hex", "8"}, e);
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd);
  EXPECT_EQ(rnd.out.size(), 16u) << describe(rnd);
  CommandResult primary = run_command({"tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", dir_ + "/primary.ctx"}, e);
  EXPECT_EQ(primary.exit_code, 0) << describe(primary);

  // The TCTI passed the programs' frames through, one block per program
  // (its log), and wrapped none ...
  const std::string tcti_log = read_all(dir_ + "/tcti.log");
  EXPECT_EQ(tcti_log.find("wrapped="), std::string::npos) << tcti_log;
  EXPECT_EQ(std::count(tcti_log.begin(), tcti_log.end(), '#'), 3) << tcti_log;
  const uint64_t tools_sessions = sum_of(tcti_log, "StartAuthSession 0x00000176 passed=([0-9]+)");
  // ... and every StartAuthSession the server got from a client was one
  // the tools sent themselves (tpm2-tools starts its own for some
  // commands): the TCTI started none, in any of the three programs.
  const std::string log = serve.stop_for_log();
  EXPECT_TRUE(serve.exited_cleanly()) << log;
  EXPECT_EQ(sum_of(log, "StartAuthSession 0x00000176 wrapped=([0-9]+)") +
                sum_of(log, "StartAuthSession 0x00000176 wrapped=[0-9]+ encrypted=[0-9]+ passed=([0-9]+)"),
            tools_sessions)
      << tcti_log << log;
  EXPECT_NE(tcti_log.find("PCR_Extend 0x00000182 passed=1"), std::string::npos) << tcti_log;
  EXPECT_NE(log.find("PCR_Extend 0x00000182 wrapped=1"), std::string::npos) << log;
  EXPECT_NE(log.find("CreatePrimary 0x00000131 wrapped=1"), std::string::npos) << log;
}

// A server whose uid is neither root nor tss (nor the uid= named): whoever
// bound the path could be anyone. As root, the server runs as nobody
// (setpriv); as another user, it runs as that user, which is not tss either.
TEST_F(ServeClientTest, ASocketServedByAnotherUserIsRefused) {
  std::vector<std::string> prefix;
  if (::getuid() == 0) {
    passwd* nobody = ::getpwnam("nobody");
    ASSERT_NE(nobody, nullptr);
    ASSERT_EQ(::chown(dir_.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    prefix = {"setpriv", "--reuid=" + std::to_string(nobody->pw_uid), "--regid=" + std::to_string(nobody->pw_gid),
              "--clear-groups", "--"};
  } else {
    passwd* tss = ::getpwnam("tss");
    ASSERT_TRUE(tss == nullptr || tss->pw_uid != ::getuid()) << "the test's user is tss";
  }
  Serve serve(dir_);
  ASSERT_TRUE(serve.start(prefix)) << serve.log();
  const std::string tpm = "serve:path=" + serve.socket();

  CommandResult rnd = run_tpmsec({"random", "8", "--tpm", tpm}, env());
  EXPECT_EQ(rnd.exit_code, 1) << describe(rnd);
  EXPECT_TRUE(rnd.out.empty()) << describe(rnd);
  EXPECT_NE(rnd.err.find("refusing a server another user could have planted"), std::string::npos) << describe(rnd);
  EXPECT_EQ(std::count(rnd.err.begin(), rnd.err.end(), '\n'), 1) << describe(rnd);
  // Naming a uid the server does not have is refused the same way.
  CommandResult named = run_tpmsec({"random", "8", "--tpm", tpm + ",uid=4242"}, env());
  EXPECT_EQ(named.exit_code, 1) << describe(named);
  EXPECT_NE(named.err.find("not by root or uid 4242"), std::string::npos) << describe(named);
  // The TCTI refuses it too: tpm2-tools gets no TPM.
  CommandResult tool =
      run_command({"tpm2_getrandom", "--hex", "8"},
                  {"TPMSEC_STATE_DIR=" + state_, "TPM2TOOLS_TCTI=" + std::string(TPMSEC_TCTI_PATH) + ":" + tpm});
  EXPECT_NE(tool.exit_code, 0) << describe(tool);
  EXPECT_NE(tool.err.find("refusing a server another user could have planted"), std::string::npos) << describe(tool);

  // Nothing was sent: the server saw no client command.
  const std::string log = serve.stop_for_log();
  EXPECT_NE(log.find("stopped: 0 client commands"), std::string::npos) << log;
}

TEST(ServeTpmString, ParsesItsPathAndUidAndRefusesTheRest) {
  auto plain = parse_transport_spec("serve");
  ASSERT_TRUE(plain.ok()) << plain.error().message();
  EXPECT_EQ(plain->kind, TpmKind::kServe);
  EXPECT_EQ(plain->path, "/run/tpmsec/tpm.sock");  // tpmsec.socket's ListenStream=
  auto named = parse_transport_spec("serve:path=/tmp/x.sock,uid=1000");
  ASSERT_TRUE(named.ok()) << named.error().message();
  EXPECT_EQ(named->path, "/tmp/x.sock");
  EXPECT_EQ(named->option("uid"), "1000");
  for (const char* bad : {"serve:port=2321", "serve:uid=-1", "serve:uid=4294967295", "serve:uid=tss",
                          "serve:/run/tpmsec/tpm.sock", "serve:path=/a,path=/b"}) {
    SCOPED_TRACE(bad);
    auto r = parse_transport_spec(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kUsage);
  }
}

// A listener of this process's own (trusted: uid= names it) that answers
// every command with `answer`: a hostile server's responses, read as the
// transport bounds them.
class OneAnswerServer {
 public:
  OneAnswerServer(const std::string& path, Bytes answer) : path_(path), answer_(std::move(answer)) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd_, 1) == 0;
    if (ok_) {
      thread_ = std::thread([this] {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        uint8_t buf[4096];
        if (::read(c, buf, sizeof(buf)) > 0) (void)!::write(c, answer_.data(), answer_.size());
        ::shutdown(c, SHUT_WR);
        while (::read(c, buf, sizeof(buf)) > 0) {
        }
        ::close(c);
      });
    }
  }
  ~OneAnswerServer() {
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  std::string path_;
  Bytes answer_;
  int fd_ = -1;
  bool ok_ = false;
  std::thread thread_;
};

TEST(ServeTransport, AResponseSizeOutsideTheBoundsIsRefusedAndTheConnectionDropped) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  const Bytes get_random = {0x80, 0x01, 0, 0, 0, 0x0c, 0, 0, 0x01, 0x7b, 0, 8};
  struct Case {
    const char* what;
    Bytes answer;
  };
  const std::vector<Case> cases = {
      {"a header claiming 1 MiB", {0x80, 0x01, 0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0}},
      {"a header claiming fewer bytes than itself", {0x80, 0x01, 0, 0, 0, 0x06, 0, 0, 0, 0}},
      {"a response cut short", {0x80, 0x01, 0, 0, 0, 0x20, 0, 0, 0, 0, 1, 2, 3}},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir + "/s" + std::to_string(n++);
    OneAnswerServer server(path, c.answer);
    ASSERT_TRUE(server.ok());
    ServeAddress address;
    address.path = path;
    address.uid = ::getuid();
    auto transport = open_serve(address);
    ASSERT_TRUE(transport.ok()) << transport.error().message();
    EXPECT_TRUE((*transport)->private_handles());
    auto r = (*transport)->transmit(get_random);
    ASSERT_FALSE(r.ok());
    // Out of step now: never used again.
    auto again = (*transport)->transmit(get_random);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.error().message().find("lost earlier"), std::string::npos) << again.error().message();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace tpmsec
