// `tpmsec serve` as a system daemon (docs/serve.md, "Running it"): a real
// `tpmsec serve --tpm embedded --dbus none --socket PATH` in its own process,
// told what systemd would tell it. It notifies READY=1 once the socket is
// served and pings WATCHDOG=1 on a NOTIFY_SOCKET the test binds; with
// stderr the journal ($JOURNAL_STREAM) every log line carries its syslog
// priority, a client's lines its uid, pid and program; SIGHUP re-reads the
// policy and keeps a connected client; as root it refuses to run without
// --allow-root; `tpmsec serve status` asks the running server, after
// tpm2-tools' commands, for its state.
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "support/serve_process.h"
#include "support/test_data.h"
#include "tpmsec-server/protected_server/status.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

using testing::CommandResult;
using testing::describe;
using testing::run_command;
using testing::run_tpmsec;
using Clock = std::chrono::steady_clock;

constexpr auto kPatience = std::chrono::seconds(60);  // a bound on waiting, never a pace

std::string temp_dir() { return testing::make_temp_dir("tpmsec-serve-daemon"); }

// serve on the embedded TPM, on its socket only (support/serve_process.h).
class Serve : public testing::ServeProcess {
 public:
  explicit Serve(const std::string& dir) : ServeProcess(dir) {}
  bool start(std::vector<std::string> args, std::vector<std::string> env = {}, bool journal = false) {
    args.insert(args.begin(), {"--tpm", "embedded", "--dbus", "none"});
    return ServeProcess::start(args, std::move(env), journal);
  }
};

// A datagram socket bound where $NOTIFY_SOCKET will name it, as systemd's.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool bound() const { return bound_; }
  // The next datagram, empty when none came within the patience.
  std::string next() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kPatience).count())) != 1) return {};
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

Bytes get_random(uint16_t n) {
  const uint8_t p[2] = {static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)};
  auto f = write_command_frame(0x17B, {}, {}, ByteView(p, 2), kMaxCommandBytes);  // TPM2_GetRandom
  return f.ok() ? *f : Bytes();
}

uint32_t rc_of(ByteView response) {
  HeaderRead h = read_frame_header(response, response.size());
  return h.check == FrameCheck::kOk ? h.header.code : 0xffffffff;
}

class ServeDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0u) << "the suite runs as root (scripts/run-tests): serve's root rule is tested here";
    dir_ = temp_dir();
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_F(ServeDaemonTest, NotifiesReadyOnceServingAndPingsTheWatchdogFromItsLoop) {
  NotifySocket notify(path("notify"));
  ASSERT_TRUE(notify.bound());
  Serve serve(dir_);
  // 400 ms: a ping at least every 200 ms (half), which the loop's turn (kPollMs) allows.
  ASSERT_TRUE(serve.start({"--allow-root"}, {"NOTIFY_SOCKET=" + path("notify"), "WATCHDOG_USEC=400000"}));
  std::string first = notify.next();
  EXPECT_NE(first.find("STATUS="), std::string::npos) << first;
  std::string ready;
  std::vector<std::string> seen{first};
  while (ready.empty()) {
    std::string d = notify.next();
    ASSERT_FALSE(d.empty()) << "no READY=1; got: " << ::testing::PrintToString(seen) << "\n" << serve.log();
    seen.push_back(d);
    if (d.find("READY=1") != std::string::npos) ready = d;
  }
  // Ready means served: the socket is there and the session is up.
  struct stat st {};
  EXPECT_EQ(::stat(serve.socket().c_str(), &st), 0);
  EXPECT_NE(ready.find("STATUS=serving"), std::string::npos) << ready;
  // Three pings in a row: the loop keeps pinging, not only once.
  int pings = 0;
  for (auto end = Clock::now() + kPatience; pings < 3;) {
    ASSERT_LT(Clock::now(), end) << "fewer than 3 watchdog pings\n" << serve.log();
    std::string d = notify.next();
    ASSERT_FALSE(d.empty()) << "watchdog pings stopped after " << pings << "\n" << serve.log();
    if (d == "WATCHDOG=1") ++pings;
  }
  serve.signal(SIGTERM);
  bool stopping = false;
  while (!stopping) {
    std::string d = notify.next();
    if (d.empty()) break;
    stopping = d.find("STOPPING=1") != std::string::npos;
  }
  EXPECT_TRUE(stopping);
  const int status = serve.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << serve.log();
}

TEST_F(ServeDaemonTest, LogLinesCarryTheirPriorityForTheJournalAndNameTheClient) {
  Serve serve(dir_);
  ASSERT_TRUE(serve.start({"--allow-root"}, {}, /*journal=*/true));
  ASSERT_TRUE(serve.wait_serving()) << serve.log();
  CommandResult rnd = run_tpmsec({"random", "8", "--tpm", "serve:path=" + serve.socket()},
                                 {"TPMSEC_STATE_DIR=" + path("client-state")});
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd);
  ASSERT_TRUE(serve.wait_log("client closed")) << serve.log();
  const int status = serve.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string log = serve.log();
  std::istringstream lines(log);
  size_t n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    EXPECT_TRUE(std::regex_search(line, std::regex("^<[0-7]>tpmsec serve: "))) << "no priority: " << line;
  }
  EXPECT_GE(n, 4u) << log;
  EXPECT_NE(log.find("<6>tpmsec serve: serving "), std::string::npos) << log;
  EXPECT_NE(log.find("<6>tpmsec serve: stopped: "), std::string::npos) << log;
  // The routine lines at debug, naming who: uid, pid and the program (tpmsec).
  auto count = [&log](const std::string& pattern) {
    const std::regex re(pattern);
    return std::distance(std::sregex_iterator(log.begin(), log.end(), re), std::sregex_iterator());
  };
  const std::string who = ": client [0-9]+, uid 0, pid [0-9]+ \\(tpmsec\\)\n";
  EXPECT_GE(count("<7>tpmsec serve: client connected .*" + who), 1) << log;
  EXPECT_EQ(count("<7>tpmsec serve: client connected .*" + who), count("<7>tpmsec serve: client closed .*" + who))
      << log;

  // Not the journal: plain lines, as a terminal wants them.
  Serve plain(dir_);
  ASSERT_TRUE(plain.start({"--allow-root"}));
  ASSERT_TRUE(plain.wait_serving()) << plain.log();
  plain.stop();
  EXPECT_EQ(plain.log().rfind("tpmsec serve: serving ", 0), 0u) << plain.log();

  // An error that ends serve is an error to the journal (`journalctl -p err`).
  Serve failed(dir_);
  ASSERT_TRUE(failed.start({"--allow-root", "--socket-group", "no-such-group-tpmsec"}, {}, /*journal=*/true));
  EXPECT_FALSE(failed.wait_serving());
  const std::string err = failed.log();
  EXPECT_TRUE(std::regex_search(err, std::regex("(^|\n)<3>tpmsec: .*no-such-group-tpmsec"))) << err;
}

TEST_F(ServeDaemonTest, SighupRereadsThePolicyAndKeepsAConnectedClient) {
  const std::string policy = path("policy.toml");
  auto write_policy = [&](const std::string& name, int every) {
    std::ofstream(policy) << "schema = \"tpmsec-policy/1\"\n\n[[rule]]\nname = \"" << name
                          << "\"\nextend = \"resident\"\nother = \"per-command\"\ncheckpoint_every = " << every
                          << "\nreason = \"a test\"\nsource = \"serve_daemon_test\"\n";
  };
  write_policy("first", 50);
  Serve serve(dir_);
  ASSERT_TRUE(serve.start({"--allow-root", "--policy", policy}));
  ASSERT_TRUE(serve.wait_serving()) << serve.log();
  auto client = open_transport("serve:path=" + serve.socket());
  ASSERT_TRUE(client.ok()) << client.error().message();
  auto before = (*client)->transmit(get_random(8));
  ASSERT_TRUE(before.ok()) << before.error().message();
  EXPECT_EQ(rc_of(*before), 0u);

  write_policy("second", 77);
  serve.signal(SIGHUP);
  ASSERT_TRUE(serve.wait_log("SIGHUP: policy " + policy + ": null key")) << serve.log();
  EXPECT_NE(serve.log().find("checkpoint every 77"), std::string::npos) << serve.log();
  ASSERT_TRUE(serve.alive()) << serve.log();
  auto after = (*client)->transmit(get_random(8));  // the same connection
  ASSERT_TRUE(after.ok()) << after.error().message();
  EXPECT_EQ(rc_of(*after), 0u);

  // A policy that does not parse: said, and the running one stays.
  std::ofstream(policy) << "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = 3\n";
  serve.signal(SIGHUP);
  ASSERT_TRUE(serve.wait_log("the policy was not reloaded")) << serve.log();
  auto still = (*client)->transmit(get_random(8));
  ASSERT_TRUE(still.ok()) << still.error().message();
  EXPECT_EQ(rc_of(*still), 0u);
  CommandResult status = run_tpmsec({"serve", "status", "--tpm", "serve:path=" + serve.socket(), "--json"});
  ASSERT_EQ(status.exit_code, 0) << describe(status);
  EXPECT_NE(status.out.find("checkpoint every 77"), std::string::npos) << status.out;
  client->reset();
  const int st = serve.stop();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st << "\n" << serve.log();
}

TEST_F(ServeDaemonTest, RefusesToRunAsRootWithoutAllowRoot) {
  Serve serve(dir_);
  ASSERT_TRUE(serve.start({}));
  ASSERT_TRUE(serve.wait_exit()) << "serve ran as root without --allow-root\n" << serve.log();
  const int status = serve.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == testing::kExitUsage) << status;
  const std::string err = serve.log();
  EXPECT_NE(err.find("--allow-root"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_FALSE(std::filesystem::exists(path("tpm.sock")));
}

TEST_F(ServeDaemonTest, StatusAsksTheRunningServerAfterTpm2ToolsCommands) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // the socket's directory: nobody may reach the socket
  Serve serve(dir_);
  ASSERT_TRUE(serve.start({"--allow-root", "--socket-group", "nogroup"}));
  ASSERT_TRUE(serve.wait_serving()) << serve.log();
  const std::string tpm = "serve:path=" + serve.socket();
  std::vector<std::string> e{"TPMSEC_STATE_DIR=" + path("client-state"),
                             "TPM2TOOLS_TCTI=" + std::string(TPMSEC_TCTI_PATH) + ":" + tpm};
  CommandResult ext = run_command({"tpm2_pcrextend", "16:sha256=" + std::string(64, 'b')}, e);
  ASSERT_EQ(ext.exit_code, 0) << describe(ext);
  CommandResult rnd = run_command({"tpm2_getrandom", "--hex", "8"}, e);
  ASSERT_EQ(rnd.exit_code, 0) << describe(rnd);

  CommandResult text = run_tpmsec({"serve", "status", "--tpm", tpm});
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  for (const char* field : {"tpmsec serve, pid ", "TPM:", "anchor:", "session:", "policy:", "clients:", "commands:"}) {
    EXPECT_NE(text.out.find(field), std::string::npos) << field << "\n" << text.out;
  }
  EXPECT_TRUE(std::regex_search(text.out, std::regex("\n  PCR_Extend +0x00000182 +1 "))) << text.out;

  CommandResult js = run_tpmsec({"serve", "status", "--tpm", tpm, "--json"});
  ASSERT_EQ(js.exit_code, 0) << describe(js);
  auto j = nlohmann::json::parse(js.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << js.out;
  EXPECT_EQ(j["pid"].get<int>(), serve.pid());
  EXPECT_GE(j["uptime_s"].get<int64_t>(), 0);
  EXPECT_EQ(j["tpm"].get<std::string>().rfind("embedded", 0), 0u) << js.out;
  EXPECT_EQ(j["anchor"]["kind"], "in-process") << js.out;
  EXPECT_EQ(j["session"]["started"].get<int>(), 1) << js.out;
  EXPECT_EQ(j["clients"]["connected"].get<int>(), 1) << js.out;  // the asker itself
  EXPECT_NE(j["clients"]["list"][0].get<std::string>().find("(tpmsec)"), std::string::npos) << js.out;
  bool extend = false, random = false;
  for (const auto& c : j["commands"]) {
    if (c["name"] == "PCR_Extend") extend = c["wrapped"].get<int>() == 1;
    if (c["name"] == "GetRandom") random = c["wrapped"].get<int>() == 1 && c["encrypted"].get<int>() == 1;
    const auto& why = c["passed_because"];
    uint64_t sum = 0;
    for (const auto& [k, v] : why.items()) sum += v.get<uint64_t>();
    EXPECT_EQ(sum, c["passed_in_clear"].get<uint64_t>()) << c.dump();
  }
  EXPECT_TRUE(extend) << js.out;
  EXPECT_TRUE(random) << js.out;

  // Another user on the socket (its group lets nobody connect) is no
  // administrator: refused by the server, as a client of any other uid.
  const passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  CommandResult other =
      run_command({"setpriv", "--reuid=" + std::to_string(nobody->pw_uid), "--regid=" + std::to_string(nobody->pw_gid),
                   "--clear-groups", TPMSEC_CLI_PATH, "serve", "status", "--tpm", tpm});
  EXPECT_EQ(other.exit_code, 1) << describe(other);
  EXPECT_NE(other.err.find("refused the status request (0xb000c)"), std::string::npos) << describe(other);
  EXPECT_EQ(other.out, "");

  // A raw frame of that code with anything more is no status request: the
  // server passes it on as any command, and the TPM refuses the code.
  auto raw = open_transport(tpm);
  ASSERT_TRUE(raw.ok());
  Bytes longer = serve::status_request();
  longer.push_back(0);
  longer[5] = static_cast<uint8_t>(longer.size());
  auto answer = (*raw)->transmit(longer);
  ASSERT_TRUE(answer.ok());
  EXPECT_NE(rc_of(*answer), 0u);
  EXPECT_EQ(answer->size(), kFrameHeaderBytes);
}

}  // namespace
}  // namespace tpmsec
