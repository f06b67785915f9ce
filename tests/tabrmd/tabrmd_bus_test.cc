// tpm2-abrmd's D-Bus front end (include/tpmsec-server/tabrmd/tabrmd_bus.h) with its
// real clients: Debian's libtss2-tcti-tabrmd.so.0 (loaded here, and by
// tpm2-tools), on a private dbus-daemon that enforces the system bus's
// default-deny policy with packaging/dbus/tpmsec.conf included.
//
// Behind the front end is a real TPM: `tpmsec serve --tpm embedded`'s
// pass-through relay (libtpms in that process), or, in this process, a relay
// of the test's own to the embedded libtpms. No mock TPM anywhere.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <list>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <tss2/tss2_tcti.h>

#include "support/direct_tpm.h"
#include "support/emulate_process.h"
#include "support/private_bus.h"
#include "support/raw_client.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "tpmsec-server/tabrmd/tabrmd_bus.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

using testing::describe;
using testing::run_command;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::seconds(60);
constexpr uint32_t kTctiRcNoConnection = 0x000A0008;  // TSS2_TCTI_RC_NO_CONNECTION (tss2_common.h)
// What the in-process server's name is: the daemon's test policy lets this
// process own it beside tpmsec serve's com.intel.tss2.Tabrmd.
constexpr const char* kInProcessName = "com.intel.tss2.Tabrmd.InProcess";
// Where the reference, Debian's tpm2-abrmd 3.0 itself, answers in the
// differential test.
constexpr const char* kReferenceName = "com.intel.tss2.Tabrmd.Reference";

using testing::Child;
using testing::PrivateBus;
using testing::spawn;

PrivateBus* g_bus = nullptr;

// One bus per process: GDBus (in the tabrmd TCTI loaded here) keeps its
// session and system bus connections for the process's life. It is both
// buses here: DBUS_SESSION_BUS_ADDRESS and DBUS_SYSTEM_BUS_ADDRESS name it,
// for this process and the programs it starts. The daemon's test policy lets
// this process own the in-process and the reference names beside tpmsec
// serve's com.intel.tss2.Tabrmd.
class BusEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    g_bus = new PrivateBus;
    std::string error = "dbus-daemon did not start";
    ASSERT_TRUE(g_bus->start({kInProcessName, kReferenceName}, &error)) << error;
    ::setenv("DBUS_SESSION_BUS_ADDRESS", g_bus->address().c_str(), 1);
    ::setenv("DBUS_SYSTEM_BUS_ADDRESS", g_bus->address().c_str(), 1);
    ::unsetenv("TPM2TOOLS_TCTI");
    ::unsetenv("TCTI");
  }
  void TearDown() override {
    g_bus->stop();
    delete g_bus;
  }
};
const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new BusEnvironment);

bool wait_for_owner(const std::string& name, bool owned) {
  return testing::wait_for_owner(g_bus->address(), name, owned);
}

// Debian's tabrmd TCTI, loaded as tpm2-tss's loader loads it.
class TabrmdTcti {
 public:
  explicit TabrmdTcti(const std::string& conf) {
    lib_ = ::dlopen("libtss2-tcti-tabrmd.so.0", RTLD_NOW);
    if (!lib_) return;
    auto info = reinterpret_cast<TSS2_TCTI_INFO_FUNC>(::dlsym(lib_, TSS2_TCTI_INFO_SYMBOL))();
    size_t size = 0;
    rc_ = info->init(nullptr, &size, conf.c_str());
    if (rc_ != 0) return;
    ctx_ = static_cast<TSS2_TCTI_CONTEXT*>(::calloc(1, size));
    rc_ = info->init(ctx_, &size, conf.c_str());
    if (rc_ != 0) {
      ::free(ctx_);
      ctx_ = nullptr;
    }
  }
  ~TabrmdTcti() { close(); }
  void close() {
    if (ctx_) {
      Tss2_Tcti_Finalize(ctx_);
      ::free(ctx_);
      ctx_ = nullptr;
    }
  }
  bool ok() const { return ctx_ != nullptr; }
  uint32_t init_rc() const { return rc_; }
  TSS2_TCTI_CONTEXT* ctx() { return ctx_; }

  uint32_t transmit(const std::vector<uint8_t>& command) {
    return Tss2_Tcti_Transmit(ctx_, command.size(), command.data());
  }
  uint32_t receive(std::vector<uint8_t>* response) {
    response->assign(4096, 0);
    size_t size = response->size();
    uint32_t rc = Tss2_Tcti_Receive(ctx_, &size, response->data(), 60000);
    response->resize(rc == 0 ? size : 0);
    return rc;
  }

 private:
  void* lib_ = nullptr;  // never dlclose'd: GLib's types must stay registered
  TSS2_TCTI_CONTEXT* ctx_ = nullptr;
  uint32_t rc_ = 0;
};

// TPM2_GetRandom(8): 80 01 (no sessions), size 12, TPM_CC_GetRandom.
using testing::kGetRandom8;

// PCR `index`'s SHA-256 value, read with tpm2_pcrread through `env`'s TCTI
// (empty: the command failed; `why` says how).
std::string read_pcr(int index, const std::vector<std::string>& env, std::string* why) {
  char tmpl[] = "/tmp/tpmsec-pcr-XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) return "";
  ::close(fd);
  auto r = run_command({"tpm2_pcrread", "sha256:" + std::to_string(index), "-o", tmpl}, env);
  std::ifstream in(tmpl, std::ios::binary);
  std::string value((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(tmpl);
  if (r.exit_code != 0) {
    *why = describe(r);
    return "";
  }
  return value;
}

uint32_t response_code(const std::vector<uint8_t>& r) {
  if (r.size() < 10) return 0xFFFFFFFF;
  return (uint32_t{r[6]} << 24) | (uint32_t{r[7]} << 16) | (uint32_t{r[8]} << 8) | r[9];
}

// --- tpmsec serve, with tpm2-tools --------------------------------------

class TabrmdServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(wait_for_owner(tabrmd::kTabrmdBusName, false)) << "someone else owns the name";
    serve_ = new Child;
    // --dbus system: the bus DBUS_SYSTEM_BUS_ADDRESS names (this private
    // one), as sd-bus and GDBus both read it: what the tools find with no
    // TCTI configured.
    serve_->pid = spawn({TPMSEC_CLI_PATH, "serve", "--allow-root", "--tpm", "embedded", "--dbus", kBus}, {});
    ASSERT_TRUE(wait_for_owner(tabrmd::kTabrmdBusName, true)) << "tpmsec serve never took the name";
  }
  static void TearDownTestSuite() {
    int status = serve_->stop();
    delete serve_;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "tpmsec serve ended with status " << status;
  }
  static std::vector<std::string> tools_env() { return {"TPM2TOOLS_TCTI=tabrmd:bus_type=session"}; }
  static inline Child* serve_ = nullptr;
  static inline const char* kBus = "system";
};

TEST_F(TabrmdServeTest, Tpm2ToolsThroughTheSessionBus) {
  auto r = run_command({"tpm2_getrandom", "--hex", "16"}, tools_env());
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out.size(), 32u) << r.out;

  // An extend through the bus, read back through it: the PCR is
  // SHA-256(old || digest) of the TPM behind the relay.
  std::string why;
  std::string before = read_pcr(16, tools_env(), &why);
  ASSERT_EQ(before.size(), 32u) << why;
  std::string digest_hex(64, 'a');
  auto ext = run_command({"tpm2_pcrextend", "16:sha256=" + digest_hex}, tools_env());
  ASSERT_EQ(ext.exit_code, 0) << describe(ext);
  std::string after = read_pcr(16, tools_env(), &why);
  ASSERT_EQ(after.size(), 32u) << why;
  std::string concat = before + std::string(32, static_cast<char>(0xaa));
  unsigned char expected[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(concat.data()), concat.size(), expected);
  EXPECT_EQ(after, std::string(reinterpret_cast<char*>(expected), sizeof(expected)));
}

// A resource manager's connection is a client with a handle space of its
// own: an object one tool created is flushed from the TPM when that tool's
// connection closes (tpm2-abrmd and /dev/tpmrm0 do the same), not merely
// hidden from the next client, and its saved context outlives the
// connection. Behind serve is `tpmsec emulate`, which takes more than one
// connection, so the test reads what the TPM holds on a connection of its
// own that serve never sees.
class TabrmdServeOnTheEmulatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(wait_for_owner(tabrmd::kTabrmdBusName, false)) << "someone else owns the name";
    emulator_ = new testing::EmulateServer;
    ASSERT_TRUE(emulator_->start({"--clock", "virtual", "--means", "--quiet", "--host", "127.0.0.1"}))
        << emulator_->log();
    serve_ = new Child;
    serve_->pid = spawn({TPMSEC_CLI_PATH, "serve", "--allow-root", "--tpm", emulator_->spec(), "--dbus", kBus},
                        {"TPMSEC_STATE_DIR=" + emulator_->dir() + "/serve-state"});
    ASSERT_TRUE(wait_for_owner(tabrmd::kTabrmdBusName, true)) << "tpmsec serve never took the name";
  }
  static void TearDownTestSuite() {
    int status = serve_->stop();
    delete serve_;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "tpmsec serve ended with status " << status;
    delete emulator_;
  }
  static std::vector<std::string> tools_env() { return {"TPM2TOOLS_TCTI=tabrmd:bus_type=session"}; }

  // The transient objects the TPM itself holds, asked on the test's own connection.
  static std::vector<uint32_t> transient_in_the_tpm() {
    testing::Direct direct(emulator_->spec());
    std::vector<uint32_t> out;
    if (!direct.ok()) return out;
    for (uint32_t h : testing::list_handles(direct.tpm()))
      if ((h >> 24) == 0x80) out.push_back(h);
    return out;
  }
  // Waits (up to kDeadline) until the TPM holds no transient object: serve
  // flushes a closed client's objects on its own loop, after the tool exited.
  static std::vector<uint32_t> transient_left_in_the_tpm() {
    std::vector<uint32_t> left = transient_in_the_tpm();
    for (auto end = Clock::now() + kDeadline; !left.empty() && Clock::now() < end; left = transient_in_the_tpm())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return left;
  }

  static inline testing::EmulateServer* emulator_ = nullptr;
  static inline Child* serve_ = nullptr;
  static inline const char* kBus = "system";
};

TEST_F(TabrmdServeOnTheEmulatorTest, AnObjectLivesAsLongAsItsConnection) {
  ASSERT_EQ(transient_in_the_tpm(), std::vector<uint32_t>{}) << "the TPM holds objects before the test";
  char tmpl[] = "/tmp/tpmsec-tabrmd-XXXXXX";
  ASSERT_TRUE(::mkdtemp(tmpl));
  std::string ctx = std::string(tmpl) + "/primary.ctx";
  auto created = run_command({"tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", ctx}, tools_env());
  ASSERT_EQ(created.exit_code, 0) << describe(created);
  EXPECT_EQ(transient_left_in_the_tpm(), std::vector<uint32_t>{})
      << "the closed connection's primary is still loaded in the TPM";
  auto listed = run_command({"tpm2_getcap", "handles-transient"}, tools_env());
  ASSERT_EQ(listed.exit_code, 0) << describe(listed);
  EXPECT_EQ(listed.out.find("0x80"), std::string::npos) << "another connection's object is listed: " << listed.out;
  // Its saved context outlives the connection: a later tool loads it and
  // uses it, and that connection's copy goes with it too.
  auto pub = run_command({"tpm2_readpublic", "-c", ctx}, tools_env());
  EXPECT_EQ(pub.exit_code, 0) << describe(pub);
  EXPECT_EQ(transient_left_in_the_tpm(), std::vector<uint32_t>{})
      << "the object loaded from its context is still loaded in the TPM";
  fs::remove_all(tmpl);
}

// No TCTI at all: tpm2-tss's loader (Debian 12's libtss2-tctildr0, 3.2.1)
// tries libtss2-tcti-default.so, then libtss2-tcti-tabrmd.so.0 with no
// configuration, which means the system bus and com.intel.tss2.Tabrmd; the
// extend it makes is then seen through the server.
TEST_F(TabrmdServeTest, NoTctiConfiguredReachesTheServerOnTheSystemBus) {
  std::vector<std::string> no_tcti = {"env", "-u", "TPM2TOOLS_TCTI", "-u", "TCTI", "-u", "DBUS_SESSION_BUS_ADDRESS"};
  auto run_plain = [&](std::vector<std::string> argv) {
    std::vector<std::string> full = no_tcti;
    full.insert(full.end(), argv.begin(), argv.end());
    return run_command(full);
  };
  std::string why;
  std::string before = read_pcr(23, tools_env(), &why);
  ASSERT_EQ(before.size(), 32u) << why;
  auto ext = run_plain({"tpm2_pcrextend", "23:sha256=" + std::string(64, 'b')});
  ASSERT_EQ(ext.exit_code, 0) << describe(ext);
  std::string after = read_pcr(23, tools_env(), &why);
  ASSERT_EQ(after.size(), 32u) << why;
  EXPECT_NE(before, after) << "the extend made with no TCTI did not reach the served TPM";
  auto random = run_plain({"tpm2_getrandom", "--hex", "8"});
  ASSERT_EQ(random.exit_code, 0) << describe(random);
  EXPECT_EQ(random.out.size(), 16u);
}

// tpm2-pkcs11 (Debian's libtpm2-pkcs11-1) with no TCTI of its own
// (TPM2_PKCS11_TCTI unset) and nothing set but what the package ships
// (packaging/tpm2-env/60-tpmsec-server.conf, read by the shell as
// environment.d would): tpm2-tss's loader finds the server on the system
// bus. p11tool (gnutls-bin) initializes a token (C_InitToken: a primary key
// made persistent, the SO's wrapping key sealed under it); the token's
// primary is then listed by the served TPM (nothing else is a TPM here: no
// /dev/tpmrm0).
TEST_F(TabrmdServeTest, Tpm2Pkcs11WithNoTctiReachesTheServer) {
  auto persistent = [] {
    auto r = run_command({"tpm2_getcap", "handles-persistent"}, tools_env());
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return r.out;
  };
  const std::string before = persistent();
  char tmpl[] = "/tmp/tpmsec-pkcs11-XXXXXX";
  ASSERT_TRUE(::mkdtemp(tmpl));
  const std::string store = tmpl;
  const std::string shipped = std::string(TPMSEC_DATA_DIR) + "/../packaging/tpm2-env/60-tpmsec-server.conf";
  std::string module;  // /usr/lib/<multiarch>/pkcs11/libtpm2_pkcs11.so
  for (const auto& dir : std::filesystem::directory_iterator("/usr/lib")) {
    const auto candidate = dir.path() / "pkcs11/libtpm2_pkcs11.so";
    if (std::filesystem::exists(candidate)) module = candidate;
  }
  ASSERT_FALSE(module.empty()) << "libtpm2-pkcs11-1 is not installed (scripts/quickstart test installs it)";
  auto p11tool = [&](std::vector<std::string> args) {
    // The shell reads the shipped file as environment.d would, then runs p11tool.
    std::vector<std::string> argv = {"env", "-u", "TPM2_PKCS11_TCTI", "-u", "TPM2TOOLS_TCTI", "-u", "TCTI"};
    argv.insert(argv.end(), {"-u", "DBUS_SESSION_BUS_ADDRESS", "sh", "-c", "set -a; . \"$0\"; set +a; exec \"$@\""});
    argv.insert(argv.end(), {shipped, "p11tool", "--provider", module});
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, {"TPM2_PKCS11_STORE=" + store, "GNUTLS_SO_PIN=12345678", "GNUTLS_PIN=87654321"});
  };
  auto init = p11tool({"--initialize", "--label=tpmsec", "pkcs11:manufacturer=IBM;token="});
  ASSERT_EQ(init.exit_code, 0) << describe(init);
  auto listed = p11tool({"--list-tokens"});
  ASSERT_EQ(listed.exit_code, 0) << describe(listed);
  EXPECT_NE(listed.out.find("token=tpmsec"), std::string::npos) << listed.out;
  // A user PIN (C_InitPIN) and a login with it (C_Login): each unseals the
  // token's wrapping key loaded under the library's salted session, which
  // encrypts the Load's answer, the loaded object's Name among it.
  auto pin = p11tool({"--initialize-pin", "pkcs11:token=tpmsec"});
  EXPECT_EQ(pin.exit_code, 0) << describe(pin);
  auto key = p11tool({"--login", "--generate-ecc", "--curve=secp256r1", "--label=k1", "pkcs11:token=tpmsec"});
  EXPECT_EQ(key.exit_code, 0) << describe(key);
  auto keys = p11tool({"--login", "--list-all-privkeys", "pkcs11:token=tpmsec"});
  EXPECT_EQ(keys.exit_code, 0) << describe(keys);
  EXPECT_NE(keys.out.find("object=k1;type=private"), std::string::npos) << keys.out;
  const std::string after = persistent();
  EXPECT_GT(after.size(), before.size()) << "the token's primary key is not on the served TPM: " << after;
  // The rest of the suite finds the TPM as it was.
  std::istringstream lines(after);
  for (std::string line; std::getline(lines, line);) {
    const std::string handle = line.substr(line.find("0x"));
    if (before.find(handle) != std::string::npos) continue;
    auto evict = run_command({"tpm2_evictcontrol", "-C", "o", "-c", handle}, tools_env());
    EXPECT_EQ(evict.exit_code, 0) << describe(evict);
  }
  std::filesystem::remove_all(store);
}

TEST_F(TabrmdServeTest, TwoToolsAtOnce) {
  // Two clients whose connections are open together: each gets its answers.
  std::vector<std::thread> threads;
  std::vector<testing::CommandResult> results(2);
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&results, i] {
      results[i] =
          run_command({"sh", "-c", "for n in 1 2 3 4 5; do tpm2_getrandom --hex 8 || exit 1; done"}, tools_env());
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(r.out.size(), 5 * 16u) << r.out;
  }
}

TEST_F(TabrmdServeTest, TwoConnectionsInterleavedAndOneHangsUpMidCommand) {
  TabrmdTcti a("bus_type=session");
  TabrmdTcti b("bus_type=session");
  ASSERT_TRUE(a.ok()) << std::hex << a.init_rc();
  ASSERT_TRUE(b.ok()) << std::hex << b.init_rc();
  std::vector<uint8_t> ra, rb;
  ASSERT_EQ(a.transmit(kGetRandom8), 0u);
  ASSERT_EQ(b.transmit(kGetRandom8), 0u);
  ASSERT_EQ(b.receive(&rb), 0u);
  ASSERT_EQ(a.receive(&ra), 0u);
  EXPECT_EQ(response_code(ra), 0u);
  EXPECT_EQ(response_code(rb), 0u);
  EXPECT_EQ(ra.size(), 20u);
  EXPECT_NE(ra, rb);
  // A hangs up with a command in flight; the server answers into a closed
  // socket, drops it, and B is served as before.
  ASSERT_EQ(a.transmit(kGetRandom8), 0u);
  a.close();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(b.transmit(kGetRandom8), 0u);
    ASSERT_EQ(b.receive(&rb), 0u);
    EXPECT_EQ(response_code(rb), 0u);
  }
  auto r = run_command({"tpm2_getrandom", "--hex", "8"}, tools_env());
  EXPECT_EQ(r.exit_code, 0) << describe(r);
}

// What tpm2-abrmd 3.0 answers (src/ipc-frontend-dbus.c): Cancel is not
// implemented; the relay sends every command at locality 0 and says so for
// any other. The codes reach the caller of Tss2_Tcti_* unchanged.
TEST_F(TabrmdServeTest, CancelAndSetLocalityThroughTheClientLibrary) {
  TabrmdTcti t("bus_type=session");
  ASSERT_TRUE(t.ok()) << std::hex << t.init_rc();
  EXPECT_EQ(Tss2_Tcti_SetLocality(t.ctx(), 0), 0u);
  EXPECT_EQ(Tss2_Tcti_SetLocality(t.ctx(), 3), tabrmd::kResmgrRcNotImplemented);
  ASSERT_EQ(t.transmit(kGetRandom8), 0u);
  EXPECT_EQ(Tss2_Tcti_Cancel(t.ctx()), tabrmd::kResmgrRcNotImplemented);
  std::vector<uint8_t> r;
  ASSERT_EQ(t.receive(&r), 0u);
  EXPECT_EQ(response_code(r), 0u);
}

TEST_F(TabrmdServeTest, IntrospectionMatchesTpm2Abrmd) {
  auto r = run_command({"busctl", "--address=" + g_bus->address(), "introspect", tabrmd::kTabrmdBusName,
                        tabrmd::kTabrmdObjectPath, tabrmd::kTabrmdInterface});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // busctl's columns: NAME TYPE SIGNATURE RESULT/VALUE FLAGS.
  auto row = [&r](const std::string& member) {
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string name, type, signature, result;
      words >> name >> type >> signature >> result;
      if (name == "." + member) return type + " " + signature + " " + result;
    }
    return std::string("missing");
  };
  EXPECT_EQ(row("CreateConnection"), "method - t") << r.out;
  EXPECT_EQ(row("Cancel"), "method t u") << r.out;
  EXPECT_EQ(row("SetLocality"), "method ty u") << r.out;
}

// The shipped policy (packaging/dbus/tpmsec.conf, tpm2-abrmd's): root may
// call the server (here busctl, sd-bus's client, which takes the descriptor
// reply too), another user may not reach it at all (the bus listens on an
// abstract socket, so only the policy stands between user nobody and it).
TEST_F(TabrmdServeTest, PolicyLetsRootCallAndRefusesAnotherUser) {
  ASSERT_EQ(::geteuid(), 0u) << "the policy test runs as root (as CI does): it calls as root and as nobody";
  std::vector<std::string> call = {"busctl",
                                   "--address=" + g_bus->address(),
                                   "call",
                                   tabrmd::kTabrmdBusName,
                                   tabrmd::kTabrmdObjectPath,
                                   tabrmd::kTabrmdInterface,
                                   "CreateConnection"};
  auto root = run_command(call);
  ASSERT_EQ(root.exit_code, 0) << describe(root);
  EXPECT_EQ(root.out.rfind("t ", 0), 0u) << root.out;
  std::vector<std::string> as_nobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
  as_nobody.insert(as_nobody.end(), call.begin(), call.end());
  auto nobody = run_command(as_nobody);
  EXPECT_NE(nobody.exit_code, 0) << describe(nobody);
  EXPECT_NE(nobody.err.find("ccess denied"), std::string::npos) << describe(nobody);
}

// Differential: Debian's tpm2-abrmd 3.0 (on a swtpm) and tpmsec serve, on
// the same bus, asked the same things by the same client library and tools,
// answer the same: introspection, Cancel's code, SetLocality's code for a
// locality the relay does not apply, another peer's use of an id, a command.
TEST_F(TabrmdServeTest, AnswersAsTpm2AbrmdDoes) {
  testing::SwtpmProcess swtpm;
  ASSERT_TRUE(swtpm.start()) << swtpm.error();
  Child abrmd;
  abrmd.pid = spawn({"tpm2-abrmd", "--session", "--allow-root", "--dbus-name", kReferenceName, "--tcti", swtpm.tcti()},
                    {"G_MESSAGES_DEBUG="});
  ASSERT_TRUE(wait_for_owner(kReferenceName, true)) << "tpm2-abrmd never took " << kReferenceName;

  struct Answers {
    std::string introspection, init, cancel, set_locality_3, foreign_cancel, random;
    bool operator==(const Answers&) const = default;
  };
  auto ask = [](const std::string& name) {
    Answers a;
    auto intro = run_command({"busctl", "--address=" + g_bus->address(), "introspect", name, tabrmd::kTabrmdObjectPath,
                              tabrmd::kTabrmdInterface});
    a.introspection = intro.out;
    TabrmdTcti t("bus_type=session,bus_name=" + name);
    a.init = std::to_string(t.init_rc());
    if (!t.ok()) return a;
    a.set_locality_3 = std::to_string(Tss2_Tcti_SetLocality(t.ctx(), 3));
    if (t.transmit(kGetRandom8) == 0) {
      a.cancel = std::to_string(Tss2_Tcti_Cancel(t.ctx()));
      std::vector<uint8_t> r;
      // Received first: the operands of + are evaluated in no set order (g++
      // read r before the receive filled it).
      const uint32_t received = t.receive(&r);
      a.random = std::to_string(received) + "/" + std::to_string(response_code(r)) + "/" + std::to_string(r.size());
    }
    auto foreign = run_command({"busctl", "--address=" + g_bus->address(), "call", name, tabrmd::kTabrmdObjectPath,
                                tabrmd::kTabrmdInterface, "Cancel", "t", "12345"});
    a.foreign_cancel = std::to_string(foreign.exit_code) + " " + foreign.err;
    return a;
  };
  Answers reference = ask(kReferenceName);
  Answers ours = ask(tabrmd::kTabrmdBusName);
  EXPECT_EQ(ours.introspection, reference.introspection);
  EXPECT_EQ(ours.init, "0");
  EXPECT_EQ(ours.init, reference.init);
  EXPECT_EQ(ours.set_locality_3, reference.set_locality_3);
  EXPECT_EQ(ours.cancel, std::to_string(tabrmd::kResmgrRcNotImplemented));
  EXPECT_EQ(ours.cancel, reference.cancel);
  EXPECT_EQ(ours.random, "0/0/20");
  EXPECT_EQ(ours.random, reference.random);
  EXPECT_NE(ours.foreign_cancel.find("No connection"), std::string::npos) << ours.foreign_cancel;
  EXPECT_EQ(ours.foreign_cancel, reference.foreign_cancel);
  EXPECT_TRUE(ours == reference);
}

TEST_F(TabrmdServeTest, SigtermEndsTheServerAndReleasesTheName) {
  // The suite's server is stopped and started again: it exits 0 on SIGTERM
  // and the name is free for the next owner.
  int status = serve_->stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(wait_for_owner(tabrmd::kTabrmdBusName, false));
  serve_->pid = spawn({TPMSEC_CLI_PATH, "serve", "--allow-root", "--tpm", "embedded", "--dbus", kBus}, {});
  ASSERT_TRUE(wait_for_owner(tabrmd::kTabrmdBusName, true));
  // A second server is refused the name, as tpm2-abrmd would be.
  auto second = testing::run_tpmsec({"serve", "--allow-root", "--tpm", "embedded", "--dbus", "session"});
  EXPECT_EQ(second.exit_code, 1) << describe(second);
  EXPECT_NE(second.err.find("already owned"), std::string::npos) << second.err;
}

// --- the socket front end, bound by serve or passed by systemd ---------

// One GetRandom over a connected socket: the response, whole (empty on failure).
std::vector<uint8_t> get_random_over(int fd) {
  if (::send(fd, kGetRandom8.data(), kGetRandom8.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(kGetRandom8.size())) {
    return {};
  }
  std::vector<uint8_t> r(10);
  for (size_t got = 0; got < r.size();) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 60000) <= 0) return {};
    ssize_t n = ::read(fd, r.data() + got, r.size() - got);
    if (n <= 0) return {};
    got += static_cast<size_t>(n);
    if (got == 10) {
      uint32_t size = (uint32_t{r[2]} << 24) | (uint32_t{r[3]} << 16) | (uint32_t{r[4]} << 8) | r[5];
      if (size < 10 || size > 4096) return {};
      r.resize(size);
    }
  }
  return r;
}

using testing::connect_unix;

// Two connections open together on the socket, each answered: through the
// socket serve binds (0660, as /dev/tpmrm0), and through one systemd passes
// (tpmsec.socket's activation, here by systemd-socket-activate).
TEST(TabrmdServeSocketTest, BoundAndSocketActivated) {
  char tmpl[] = "/tmp/tpmsec-sock-XXXXXX";
  ASSERT_TRUE(::mkdtemp(tmpl));
  for (bool activated : {false, true}) {
    std::string path = std::string(tmpl) + (activated ? "/activated.sock" : "/bound.sock");
    Child serve;
    if (activated) {
      serve.pid = spawn({"systemd-socket-activate", "-l", path, TPMSEC_CLI_PATH, "serve", "--allow-root", "--tpm",
                         "embedded", "--dbus", "none"},
                        {});
    } else {
      serve.pid = spawn(
          {TPMSEC_CLI_PATH, "serve", "--allow-root", "--tpm", "embedded", "--dbus", "none", "--socket", path}, {});
    }
    int a = -1;
    for (auto end = Clock::now() + kDeadline; a < 0 && Clock::now() < end;) {
      a = connect_unix(path);
      if (a < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_GE(a, 0) << path;
    if (!activated) {
      struct stat st {};
      ASSERT_EQ(::stat(path.c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 0777, 0660u);
    }
    int b = connect_unix(path);
    ASSERT_GE(b, 0);
    auto rb = get_random_over(b);
    auto ra = get_random_over(a);
    EXPECT_EQ(rb.size(), 20u);
    EXPECT_EQ(response_code(rb), 0u);
    EXPECT_EQ(ra.size(), 20u);
    EXPECT_EQ(response_code(ra), 0u);
    ::close(a);
    // A frame larger than any TPM command ends that connection, not the server.
    std::vector<uint8_t> huge = {0x80, 0x01, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x01, 0x7b};
    ASSERT_EQ(::send(b, huge.data(), huge.size(), MSG_NOSIGNAL), 10);
    // It is answered TPM_RC_COMMAND_SIZE (a TPM response frame, as the
    // kernel answers a malformed command), then the connection is closed.
    uint8_t answer[64];
    size_t got = 0;
    for (;;) {
      pollfd p{b, POLLIN, 0};
      ASSERT_GT(::poll(&p, 1, 60000), 0);
      ssize_t n = ::read(b, answer + got, sizeof(answer) - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ASSERT_EQ(got, 10u) << "the server kept a connection that sent a 1 MiB frame header";
    EXPECT_EQ(response_code(std::vector<uint8_t>(answer, answer + got)), 0x142u);  // TPM_RC_COMMAND_SIZE
    ::close(b);
    int again = connect_unix(path);
    ASSERT_GE(again, 0);
    EXPECT_EQ(response_code(get_random_over(again)), 0u);
    ::close(again);
    int status = serve.stop();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    if (!activated) EXPECT_FALSE(fs::exists(path)) << "serve left the socket it bound";
  }
  fs::remove_all(tmpl);
}

// --- TabrmdBus in this process, behind a relay of the test's own --------

// The server side a test drives: TabrmdBus and a relay to the embedded
// TPM, on a thread of their own (the client library's D-Bus calls block).
class InProcessServer {
 public:
  explicit InProcessServer(size_t max_connections) {
    auto tpm = open_transport("embedded");
    EXPECT_TRUE(tpm.ok()) << tpm.error().message();
    if (!tpm.ok()) return;
    tpm_ = std::move(*tpm);
    tabrmd::TabrmdBusOptions options;
    options.bus = tabrmd::TabrmdBusOptions::Bus::kSession;
    options.name = kInProcessName;
    options.max_connections = max_connections;
    tabrmd::TabrmdCallbacks callbacks;
    callbacks.on_connection = [this](tabrmd::OwnedFd fd, uint64_t id, const tabrmd::BusPeer& peer) {
      std::lock_guard<std::mutex> lock(mu_);
      ids_.push_back(id);
      peers_.push_back(peer);
      clients_.push_back({std::move(fd), id});
    };
    callbacks.on_set_locality = [this](uint64_t id, uint8_t locality) -> uint32_t {
      std::lock_guard<std::mutex> lock(mu_);
      localities_.push_back({id, locality});
      return locality <= 4 ? 0 : tabrmd::kResmgrRcBadValue;
    };
    auto bus = tabrmd::TabrmdBus::open(options, std::move(callbacks));
    EXPECT_TRUE(bus.ok()) << bus.error().message();
    if (!bus.ok()) return;
    bus_ = std::move(*bus);
    stop_ = tabrmd::OwnedFd(::eventfd(0, EFD_CLOEXEC));
    thread_ = std::thread([this] { loop(); });
  }
  ~InProcessServer() {
    if (thread_.joinable()) {
      uint64_t one = 1;
      (void)!::write(stop_.get(), &one, sizeof(one));
      thread_.join();
    }
  }
  bool ok() const { return thread_.joinable(); }
  std::vector<uint64_t> ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return ids_;
  }
  std::vector<tabrmd::BusPeer> peers() {
    std::lock_guard<std::mutex> lock(mu_);
    return peers_;
  }
  std::vector<std::pair<uint64_t, uint8_t>> localities() {
    std::lock_guard<std::mutex> lock(mu_);
    return localities_;
  }
  bool wait_for_open(size_t n) {
    for (auto end = Clock::now() + kDeadline; Clock::now() < end;) {
      if (open_.load() == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // The ids of the first n connections: a client's CreateConnection returns
  // once the reply is sent, before the server's thread records the new
  // connection (on_connection runs after the send), so a test that reads the
  // ids right after a client opens must wait for them.
  std::vector<uint64_t> ids_once(size_t n) {
    for (auto end = Clock::now() + kDeadline; Clock::now() < end;) {
      if (auto seen = ids(); seen.size() >= n) return seen;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ids();
  }

 private:
  struct Client {
    tabrmd::OwnedFd fd;
    uint64_t id;
  };
  void loop() {
    for (;;) {
      std::vector<pollfd> fds{{stop_.get(), POLLIN, 0}, {bus_->fd(), bus_->events(), 0}};
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& c : clients_) fds.push_back({c.fd.get(), POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), bus_->timeout_ms()) < 0) continue;
      if (fds[0].revents) return;
      ASSERT_TRUE(bus_->process().ok());
      std::lock_guard<std::mutex> lock(mu_);
      size_t i = 2;
      for (auto it = clients_.begin(); it != clients_.end() && i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || relay_one(it->fd.get())) {
          ++it;
          continue;
        }
        bus_->connection_closed(it->id);
        it = clients_.erase(it);
      }
      open_ = bus_->open_connections();
    }
  }
  // One whole command in, its answer out (the client library writes a
  // command in one piece); false when the client is gone.
  bool relay_one(int fd) {
    uint8_t buf[4096];
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 10) return false;
    auto rsp = tpm_->transmit(ByteView(buf, static_cast<size_t>(n)));
    if (!rsp.ok()) return false;
    return ::send(fd, rsp->data(), rsp->size(), MSG_NOSIGNAL) == static_cast<ssize_t>(rsp->size());
  }

  std::unique_ptr<Transport> tpm_;
  std::unique_ptr<tabrmd::TabrmdBus> bus_;
  tabrmd::OwnedFd stop_;
  std::thread thread_;
  std::mutex mu_;
  std::list<Client> clients_;
  std::vector<uint64_t> ids_;
  std::vector<tabrmd::BusPeer> peers_;
  std::vector<std::pair<uint64_t, uint8_t>> localities_;
  std::atomic<size_t> open_{0};
};

std::string in_process_conf() { return std::string("bus_type=session,bus_name=") + kInProcessName; }

TEST(TabrmdBusTest, ConnectionsAreCountedLimitedAndFreedWhenTheClientHangsUp) {
  InProcessServer server(2);
  ASSERT_TRUE(server.ok());
  {
    TabrmdTcti a(in_process_conf());
    TabrmdTcti b(in_process_conf());
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_TRUE(server.wait_for_open(2));
    // A third is refused (com.intel.tss2.Tabrmd.Error.General): the client
    // library reports no connection.
    TabrmdTcti c(in_process_conf());
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.init_rc(), kTctiRcNoConnection);
    std::vector<uint8_t> r;
    ASSERT_EQ(a.transmit(kGetRandom8), 0u);
    ASSERT_EQ(a.receive(&r), 0u);
    EXPECT_EQ(response_code(r), 0u);
  }
  // Both hung up: their slots are free and a new client is served.
  ASSERT_TRUE(server.wait_for_open(0));
  TabrmdTcti d(in_process_conf());
  ASSERT_TRUE(d.ok()) << std::hex << d.init_rc();
  auto ids = server.ids_once(3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_NE(ids[0], ids[1]);
  // Who the client is comes from the bus daemon: this process.
  for (const auto& peer : server.peers()) {
    EXPECT_EQ(peer.pid, ::getpid());
    EXPECT_EQ(peer.uid, ::geteuid());
    EXPECT_EQ(peer.unique_name.rfind(":1.", 0), 0u) << peer.unique_name;
  }
}

TEST(TabrmdBusTest, SetLocalityReachesTheServerForThatConnection) {
  InProcessServer server(4);
  ASSERT_TRUE(server.ok());
  TabrmdTcti t(in_process_conf());
  ASSERT_TRUE(t.ok()) << std::hex << t.init_rc();
  EXPECT_EQ(Tss2_Tcti_SetLocality(t.ctx(), 3), 0u);
  EXPECT_EQ(Tss2_Tcti_SetLocality(t.ctx(), 7), tabrmd::kResmgrRcBadValue);
  auto ids = server.ids();
  ASSERT_EQ(ids.size(), 1u);
  auto seen = server.localities();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(ids[0], uint8_t{3}));
  EXPECT_EQ(seen[1], std::make_pair(ids[0], uint8_t{7}));
  // Cancel is answered as tpm2-abrmd answers it, in the state the client
  // library allows it (a command sent, its answer not yet read).
  ASSERT_EQ(t.transmit(kGetRandom8), 0u);
  EXPECT_EQ(Tss2_Tcti_Cancel(t.ctx()), tabrmd::kResmgrRcNotImplemented);
  std::vector<uint8_t> r;
  ASSERT_EQ(t.receive(&r), 0u);
  EXPECT_EQ(response_code(r), 0u);
}

// Another bus peer that learnt (or guessed) a live connection's id cannot
// use it: the id is honoured only for the peer that created it.
TEST(TabrmdBusTest, AnotherPeerCannotCancelOrSetTheLocalityOfAConnection) {
  InProcessServer server(4);
  ASSERT_TRUE(server.ok());
  TabrmdTcti t(in_process_conf());
  ASSERT_TRUE(t.ok()) << std::hex << t.init_rc();
  auto ids = server.ids_once(1);
  ASSERT_EQ(ids.size(), 1u);
  std::string id = std::to_string(ids[0]);
  for (const std::vector<std::string>& call :
       {std::vector<std::string>{"SetLocality", "ty", id, "3"}, std::vector<std::string>{"Cancel", "t", id}}) {
    std::vector<std::string> argv{"busctl",       "--address=" + g_bus->address(), "call",
                                  kInProcessName, tabrmd::kTabrmdObjectPath,       tabrmd::kTabrmdInterface};
    argv.insert(argv.end(), call.begin(), call.end());
    auto r = run_command(argv);
    EXPECT_NE(r.exit_code, 0) << describe(r);
    EXPECT_NE(r.err.find("No connection"), std::string::npos) << describe(r);
  }
  EXPECT_TRUE(server.localities().empty());
  // The connection itself is untouched.
  EXPECT_EQ(Tss2_Tcti_SetLocality(t.ctx(), 2), 0u);
  ASSERT_EQ(t.transmit(kGetRandom8), 0u);
  std::vector<uint8_t> r;
  ASSERT_EQ(t.receive(&r), 0u);
  EXPECT_EQ(response_code(r), 0u);
}

}  // namespace
}  // namespace tpmsec
