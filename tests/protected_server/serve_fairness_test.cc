// Issue 38, item 2: no uid can deny service to another through `tpmsec
// serve`. Each test runs `tpmsec serve --tpm embedded` (libtpms: 64 session
// handles) on a private dbus-daemon and a Unix socket, an attacker as user
// nobody (uid 65534) driving raw clients on the socket and Debian's tabrmd
// TCTI on the bus from a forked process that holds what it opened, and a
// victim as another uid (1, daemon) running Debian's tpm2-tools through the
// tabrmd TCTI while the attacker is at its limit:
//   1. the attacker opens sessions until refused: the victim's
//      tpm2_startauthsession still gets one, and the next tool loads it;
//   2. the attacker abandons more sessions than a uid may keep: the
//      victim's session, saved by one tpm2-tools process, is still loadable
//      by the next;
//   3. the attacker holds every connection of both fronts, idle: the
//      victim still connects to each and is served;
//   4. connections the server refuses free their bus slots: after rounds of
//      refusals the victim still connects over D-Bus.
// The private bus lets every uid call the server (as a host whose policy
// opens it to group tss with both users in it); only the server's limits
// stand between the two.
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <tss2/tss2_tcti.h>

#include "support/exited_peer.h"
#include "support/private_bus.h"
#include "support/raw_client.h"
#include "support/run_command.h"
#include "support/serve_process.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::CommandResult;
using testing::describe;
using testing::run_command;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kBusName = "com.intel.tss2.Tabrmd";
constexpr uid_t kAttacker = 65534;  // nobody
constexpr uid_t kVictim = 1;        // daemon
constexpr gid_t kNogroup = 65534;   // the socket's group: both may connect
constexpr uint32_t kSessionHandles = 0x905;
constexpr auto kDeadline = std::chrono::seconds(120);

// StartAuthSession(tpmKey = bind = TPM_RH_NULL), unsalted HMAC, SHA-256.
const uint8_t kStartSession[] = {0x80, 0x01, 0x00, 0x00, 0x00, 0x2b, 0x00, 0x00, 0x01, 0x76, 0x40,
                                 0x00, 0x00, 0x07, 0x40, 0x00, 0x00, 0x07, 0x00, 0x10, 0x3c, 0x3c,
                                 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c,
                                 0x3c, 0x3c, 0x3c, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x0b};
const uint8_t kGetRandom8[] = {0x80, 0x01, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x01, 0x7b, 0x00, 0x08};

uint32_t rc_of(const uint8_t* r, size_t n) { return n < 10 ? 0xFFFFFFFFu : load_be32(r + 6); }

// --- what a forked attacker calls: no allocation but its own buffers -----
// (its connections and round trips: support/raw_client.h)

// `count` (at most 16) connections through Debian's tabrmd TCTI, all open
// at once, each asked a GetRandom; how many were answered. Then closed
// (finalized) if `finalize`, else kept open.
uint32_t tabrmd_connections(int count, bool finalize) {
  void* lib = ::dlopen("libtss2-tcti-tabrmd.so.0", RTLD_NOW);
  if (!lib) return 0;
  auto info = reinterpret_cast<TSS2_TCTI_INFO_FUNC>(::dlsym(lib, TSS2_TCTI_INFO_SYMBOL))();
  uint32_t served = 0;
  TSS2_TCTI_CONTEXT* held[16] = {};
  for (int i = 0; i < count && i < 16; ++i) {
    size_t size = 0;
    if (info->init(nullptr, &size, "bus_type=session") != 0) continue;
    auto* ctx = static_cast<TSS2_TCTI_CONTEXT*>(::calloc(1, size));
    if (info->init(ctx, &size, "bus_type=session") != 0) {
      ::free(ctx);
      continue;
    }
    uint8_t r[64];
    size_t n = sizeof(r);
    if (Tss2_Tcti_Transmit(ctx, sizeof(kGetRandom8), kGetRandom8) == 0 && Tss2_Tcti_Receive(ctx, &n, r, 60000) == 0 &&
        rc_of(r, n) == 0) {
      ++served;
    }
    held[i] = ctx;
  }
  for (TSS2_TCTI_CONTEXT* ctx : held) {
    if (ctx && finalize) {
      Tss2_Tcti_Finalize(ctx);
      ::free(ctx);
    }
  }
  return served;
}

// A forked process of another uid (group nogroup, no others) running an
// attack: it reports what it reached and holds what it opened until
// released. The test process has no other thread when it forks.
class Attacker {
 public:
  using Report = std::array<uint32_t, 4>;
  template <class Attack>
  bool start(uid_t uid, Attack attack) {
    int report[2], hold[2];
    if (::pipe2(report, O_CLOEXEC) != 0 || ::pipe2(hold, O_CLOEXEC) != 0) return false;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(report[0]);
      ::close(hold[1]);
      ::signal(SIGPIPE, SIG_IGN);  // a refused connection's write fails, nothing more
      Report out{};
      if (::setgroups(0, nullptr) == 0 && ::setgid(kNogroup) == 0 && ::setuid(uid) == 0 && ::getuid() == uid) {
        out = attack();
      }
      (void)!::write(report[1], out.data(), sizeof(out));
      char b;
      (void)!::read(hold[0], &b, 1);  // until released (or the test ends)
      ::_exit(0);
    }
    ::close(report[1]);
    ::close(hold[0]);
    report_ = report[0];
    hold_ = hold[1];
    return pid_ > 0;
  }
  // What the attack reached, once it is there.
  std::optional<Report> report() {
    Report r{};
    pollfd p{report_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kDeadline).count())) <= 0) return std::nullopt;
    if (::read(report_, r.data(), sizeof(r)) != static_cast<ssize_t>(sizeof(r))) return std::nullopt;
    return r;
  }
  // Lets it go: it exits and everything it held closes.
  void release() {
    if (hold_ >= 0) ::close(hold_);
    hold_ = -1;
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  ~Attacker() {
    release();
    if (report_ >= 0) ::close(report_);
  }

 private:
  pid_t pid_ = -1;
  int report_ = -1, hold_ = -1;
};

testing::PrivateBus* g_bus = nullptr;

class ServeFairnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_bus = new testing::PrivateBus;
    std::string error = "dbus-daemon did not start";
    ASSERT_TRUE(g_bus->start({kBusName}, &error)) << error;
    ::setenv("DBUS_SESSION_BUS_ADDRESS", g_bus->address().c_str(), 1);
    ::unsetenv("TPM2TOOLS_TCTI");
    ::unsetenv("TCTI");
  }
  static void TearDownTestSuite() {
    delete g_bus;
    g_bus = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0u) << "the test runs as root (as CI does): it runs clients as two other users";
    char tmpl[] = "/tmp/tpmsec-serve-fair-XXXXXX";
    ASSERT_TRUE(::mkdtemp(tmpl));
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0711);
    fs::create_directory(victim_dir());
    ASSERT_EQ(::chown(victim_dir().c_str(), kVictim, kNogroup), 0);
    serve_ = std::make_unique<testing::ServeProcess>(dir_);
  }
  void TearDown() override {
    if (serve_started_) {
      int status = serve_->stop();
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "tpmsec serve ended with " << status << log();
    }
    serve_.reset();
    fs::remove_all(dir_);
  }

  std::string socket_path() const { return serve_->socket(); }
  std::string victim_dir() const { return dir_ + "/victim"; }
  std::string log() const { return serve_->log(); }

  // tpmsec serve on the embedded TPM, the private bus and a socket of group
  // nogroup; its stderr in serve.log.
  void start_serve(const std::vector<std::string>& limits, const testing::PrivateBus* bus = nullptr) {
    const std::string address = (bus ? bus : g_bus)->address();
    ASSERT_TRUE(testing::wait_for_owner(address, kBusName, false)) << "the bus name is still owned";
    std::vector<std::string> args = {"--allow-root", "--tpm",          "embedded", "--dbus",
                                     "session",      "--socket-group", "nogroup"};
    args.insert(args.end(), limits.begin(), limits.end());
    if (bus) args.insert(args.end(), {"--dbus-address", address});
    ASSERT_TRUE(serve_->start(args));
    serve_started_ = true;
    ASSERT_TRUE(testing::wait_for_owner(address, kBusName, true)) << "serve never took the name" << log();
    ASSERT_TRUE(serve_->wait_serving()) << log();
  }

  // A tpm2-tools program as the victim (uid 1, group nogroup), over D-Bus.
  CommandResult victim(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"setpriv", "--reuid=" + std::to_string(kVictim), "--regid=" + std::to_string(kNogroup),
                               "--clear-groups", "--"});
    return run_command(argv, {"TPM2TOOLS_TCTI=tabrmd:bus_type=session", "HOME=" + victim_dir()});
  }
  // A raw GetRandom on the socket as the victim: its response code.
  uint32_t victim_on_socket() {
    const std::string sock = socket_path();
    Attacker v;
    if (!v.start(kVictim, [&] {
          Attacker::Report out{0xFFFFFFFFu};
          static uint8_t r[64];
          int fd = testing::connect_unix(sock);
          if (fd >= 0)
            out[0] = rc_of(r, testing::transact_once(fd, ByteView(kGetRandom8, sizeof(kGetRandom8)), r, sizeof(r)));
          return out;
        })) {
      return 0xFFFFFFFFu;
    }
    auto got = v.report();
    return got ? (*got)[0] : 0xFFFFFFFFu;
  }

  std::string dir_;
  std::unique_ptr<testing::ServeProcess> serve_;
  bool serve_started_ = false;  // and not stopped by the test: TearDown stops it
};

// 1. The attacker opens sessions (on 16 connections, 8 each, or until
// refused) with a per-uid limit above the TPM's pool, so only the fair
// shares stand in its way: it gets most of the TPM's 64 handles and is then
// refused TPM_RC_SESSION_HANDLES. The victim's tpm2_startauthsession still
// gets a session (one of the attacker's, over its share, flushed for it),
// the next tool loads it, and the attacker's next session is refused.
TEST_F(ServeFairnessTest, ASessionHoarderCannotStarveAnotherUid) {
  start_serve({"--max-sessions", "64"});
  const std::string sock = socket_path();
  Attacker a;
  ASSERT_TRUE(a.start(kAttacker, [&] {
    Attacker::Report out{};
    static uint8_t r[256];
    for (int c = 0; c < 16 && out[1] == 0; ++c) {
      // Each connection a process of its own (gone: the space is the
      // connection's), so that what it holds is bounded by the uid's limits.
      int fd = testing::connect_from_exited_process(sock);
      if (fd < 0) break;
      for (int i = 0; i < 8; ++i) {
        uint32_t rc =
            rc_of(r, testing::transact_once(fd, ByteView(kStartSession, sizeof(kStartSession)), r, sizeof(r)));
        if (rc != 0) {
          out[1] = rc;
          break;
        }
        ++out[0];
      }
    }
    return out;
  }));
  auto held = a.report();
  ASSERT_TRUE(held.has_value()) << log();
  EXPECT_GE((*held)[0], 48u) << "the attacker got few sessions: the test attacks nothing";
  EXPECT_LT((*held)[0], 64u);
  EXPECT_EQ((*held)[1], kSessionHandles) << "the attacker was not refused by the server";

  auto start = victim({"tpm2_startauthsession", "--hmac-session", "-S", victim_dir() + "/v.ctx"});
  ASSERT_EQ(start.exit_code, 0) << "the attacker held " << (*held)[0] << "\n" << describe(start) << log();
  EXPECT_NE(log().find("over its share"), std::string::npos) << log();

  // Over its share with the handles taken, the attacker gets no more.
  Attacker more;
  ASSERT_TRUE(more.start(kAttacker, [&] {
    Attacker::Report out{};
    static uint8_t r[256];
    int fd = testing::connect_unix(sock);
    out[0] = fd < 0
                 ? 0xFFFFFFFFu
                 : rc_of(r, testing::transact_once(fd, ByteView(kStartSession, sizeof(kStartSession)), r, sizeof(r)));
    return out;
  }));
  auto again = more.report();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ((*again)[0], kSessionHandles);

  auto load = victim({"tpm2_sessionconfig", victim_dir() + "/v.ctx"});
  EXPECT_EQ(load.exit_code, 0) << describe(load) << log();
  auto flush = victim({"tpm2_flushcontext", victim_dir() + "/v.ctx"});
  EXPECT_EQ(flush.exit_code, 0) << describe(flush) << log();
  EXPECT_EQ(victim({"tpm2_getrandom", "--hex", "8"}).exit_code, 0);
}

// 2. The victim's session saved by one tpm2-tools process (kept for its uid
// when the tool exits) is still loadable by the next after the attacker
// started, saved and left 24 sessions (more than a uid may keep, 16): the
// attacker's own oldest gave way, never the victim's.
TEST_F(ServeFairnessTest, AnotherUidsAbandonedSessionsNeverFlushTheVictims) {
  start_serve({});
  auto start = victim({"tpm2_startauthsession", "--hmac-session", "-S", victim_dir() + "/v.ctx"});
  ASSERT_EQ(start.exit_code, 0) << describe(start) << log();
  const std::string sock = socket_path();
  Attacker a;
  ASSERT_TRUE(a.start(kAttacker, [&] {
    Attacker::Report out{};
    static uint8_t r[4096];
    for (int i = 0; i < 24; ++i) {
      int fd = testing::connect_from_exited_process(sock);  // a program of its own, as tpm2-tools' are
      if (fd < 0) break;
      size_t n = testing::transact_once(fd, ByteView(kStartSession, sizeof(kStartSession)), r, sizeof(r));
      if (rc_of(r, n) != 0 || n < 14) break;
      uint8_t save[14] = {0x80, 0x01, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x01, 0x62};
      std::copy(r + 10, r + 14, save + 10);
      if (rc_of(r, testing::transact_once(fd, ByteView(save, sizeof(save)), r, sizeof(r))) != 0) break;
      ::close(fd);  // abandoned: kept for uid nobody
      ++out[0];
    }
    // One more round trip: the server has seen every close before it answers.
    int fd = testing::connect_unix(sock);
    out[1] = fd < 0 ? 0xFFFFFFFFu
                    : rc_of(r, testing::transact_once(fd, ByteView(kGetRandom8, sizeof(kGetRandom8)), r, sizeof(r)));
    return out;
  }));
  auto left = a.report();
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ((*left)[0], 24u) << log();
  EXPECT_EQ((*left)[1], 0u);
  auto load = victim({"tpm2_sessionconfig", victim_dir() + "/v.ctx"});
  EXPECT_EQ(load.exit_code, 0) << "the victim's kept session was flushed: " << describe(load) << log();
  auto flush = victim({"tpm2_flushcontext", victim_dir() + "/v.ctx"});
  EXPECT_EQ(flush.exit_code, 0) << describe(flush) << log();
}

// 3. With room for 4 connections per front and 8 per uid, the attacker
// holds all of both fronts, idle: 4 raw clients on the socket and 4 tabrmd
// TCTI connections on the bus. The victim's tpm2_getrandom over D-Bus and
// its raw GetRandom on the socket are served: an idle connection of the uid
// holding most gave way on each front.
TEST_F(ServeFairnessTest, IdleConnectionsOfOneUidNeverLockAnotherOut) {
  start_serve({"--max-clients", "4", "--max-connections", "8"});
  const std::string sock = socket_path();
  Attacker a;
  ASSERT_TRUE(a.start(kAttacker, [&] {
    Attacker::Report out{};
    static uint8_t r[64];
    for (int i = 0; i < 4; ++i) {
      int fd = testing::connect_unix(sock);  // held open, idle
      if (fd >= 0 &&
          rc_of(r, testing::transact_once(fd, ByteView(kGetRandom8, sizeof(kGetRandom8)), r, sizeof(r))) == 0)
        ++out[0];
    }
    out[1] = tabrmd_connections(4, /*finalize=*/false);
    return out;
  }));
  auto held = a.report();
  ASSERT_TRUE(held.has_value());
  ASSERT_EQ((*held)[0], 4u) << "the attacker does not hold the socket front" << log();
  ASSERT_EQ((*held)[1], 4u) << "the attacker does not hold the D-Bus front" << log();

  auto random = victim({"tpm2_getrandom", "--hex", "8"});
  EXPECT_EQ(random.exit_code, 0) << describe(random) << log();
  EXPECT_EQ(random.out.size(), 16u) << describe(random);
  EXPECT_EQ(victim_on_socket(), 0u) << log();
  EXPECT_NE(log().find("closed for uid 1's"), std::string::npos) << log();
}

// 4. Connections the server refuses (here: beyond a uid's 2) free their
// slot on the bus (8 with --max-clients 4): after 4 rounds of 5
// connections (12 refused), while the attacker holds 2, the victim still
// connects over D-Bus.
TEST_F(ServeFairnessTest, RefusedBusConnectionsFreeTheirSlots) {
  start_serve({"--max-clients", "4", "--max-connections", "2"});
  for (int round = 0; round < 4; ++round) {
    Attacker a;
    ASSERT_TRUE(a.start(kAttacker, [] { return Attacker::Report{tabrmd_connections(5, /*finalize=*/true)}; }));
    auto served = a.report();
    ASSERT_TRUE(served.has_value());
    EXPECT_LE((*served)[0], 2u) << "more connections of one uid than --max-connections were served";
  }
  // The attacker holds its 2 again: with the refused ones' slots leaked (6,
  // all a leak can reach) the bus is full. Slots are freed as the server sees
  // the refusals and closes: the victim connects once they are (with a leak,
  // never).
  Attacker holder;
  ASSERT_TRUE(holder.start(kAttacker, [] { return Attacker::Report{tabrmd_connections(2, /*finalize=*/false)}; }));
  auto holding = holder.report();
  ASSERT_TRUE(holding.has_value());
  CommandResult random;
  for (auto end = Clock::now() + kDeadline; Clock::now() < end;) {
    random = victim({"tpm2_getrandom", "--hex", "8"});
    if (random.exit_code == 0) break;
  }
  EXPECT_EQ(random.exit_code, 0) << describe(random) << log();
  EXPECT_NE(log().find("connection refused"), std::string::npos) << log();
}

// 5. The bus goes away (its daemon killed): serve stops, exit 1, with the
// reason on one line, for its supervisor to restart it.
TEST_F(ServeFairnessTest, ABusFailureStopsTheServer) {
  testing::PrivateBus bus;
  std::string error = "dbus-daemon did not start";
  ASSERT_TRUE(bus.start({kBusName}, &error)) << error;
  start_serve({}, &bus);
  bus.stop();
  ASSERT_TRUE(serve_->wait_exit()) << "serve did not stop when its bus went away" << log();
  const int status = serve_->stop();  // the status it ended with
  serve_started_ = false;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << log();
  const std::string text = log();
  const std::string line = "tpmsec: the D-Bus front end failed: ";
  ASSERT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find('\n', text.find(line)), text.size() - 1) << "the reason is not one last line: " << text;
}

}  // namespace
}  // namespace tpmsec
