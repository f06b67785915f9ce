// `tpmsec serve` attacked as issue 33's "How it is checked" says: real
// clients only (Debian's tpm2-tools through its tabrmd TCTI on a private
// dbus-daemon, tpm2-openssl, systemd-creds, and raw clients on serve's Unix
// socket, one of them another uid), and the test's interposer
// (support/interposer.h) between serve and a real swtpm, recording every
// byte and rewriting or forging what the rule says. Every bus attack the
// TCTI refuses (tests/tcti/tcti_test.cc) is refused through the server too.
//
// Each test starts its own `tpmsec serve --tpm swtpm:…(the interposer)
// --null-name …`, so nothing a server cached (names, its session) carries
// from one test to the next, and ends it with SIGTERM: exit 0, and then,
// straight to the swtpm, nothing left loaded or saved.
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
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/exited_peer.h"
#include "support/interposer.h"
#include "support/private_bus.h"
#include "support/raw_client.h"
#include "support/run_command.h"
#include "support/serve_fixture.h"
#include "support/serve_process.h"
#include "support/swtpm_process.h"
#include "support/test_data.h"
#include "support/tpm_frames.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/null_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::CommandResult;
using testing::connect_unix;
using testing::contains;
using testing::describe;
using testing::hmac_with;
using testing::kGetRandom8;
using testing::rc_of;
using testing::run_command;
using testing::slurp;
using testing::start_auth_session;
using testing::transact;
using testing::with_handle;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr auto kDeadline = std::chrono::seconds(60);
constexpr const char* kBusName = "com.intel.tss2.Tabrmd";
constexpr uint32_t kCcStartAuthSession = 0x176, kCcPcrExtend = 0x182, kCcUnseal = 0x15E, kCcNvRead = 0x14E,
                   kCcNvWrite = 0x137, kCcFlushContext = 0x165, kCcCreatePrimary = 0x131, kCcGetRandom = 0x17B,
                   kCcContextSave = 0x162, kCcPolicyGetDigest = 0x189, kCcPolicyCommandCode = 0x16C,
                   kCcGetCapability = 0x17A, kCcCreate = 0x153;
constexpr uint32_t kNobody = 65534;  // user nobody, group nogroup (Debian)

// --- raw frames, as a client that is not tpm2-tss writes them -----------

Bytes policy_command_code(uint32_t session, uint32_t code) {
  return testing::no_sessions_command(kCcPolicyCommandCode, [&](Writer& w) {
    w.u32(session);
    w.u32(code);
  });
}
Bytes flush_context(uint32_t handle) { return with_handle(kCcFlushContext, handle); }
Bytes get_handles(uint32_t first) {
  return testing::no_sessions_command(kCcGetCapability, [first](Writer& w) {
    w.u32(1);  // TPM_CAP_HANDLES
    w.u32(first);
    w.u32(64);
  });
}
// An HMAC key of the owner's (support/raw_client.h): fixedTPM | fixedParent
// | sensitiveDataOrigin | userWithAuth | sign, no unique.
Bytes create_hmac_primary() { return testing::create_hmac_primary(0x00040072, {}); }
Bytes read_public(uint32_t object) { return with_handle(0x173, object); }

uint16_t load_be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// The handles a GetCapability(TPM_CAP_HANDLES) response lists.
std::vector<uint32_t> listed_handles(ByteView r) {
  std::vector<uint32_t> out;
  if (rc_of(r) != 0 || r.size() < 19) return out;
  uint32_t n = load_be32(r.data() + 15);
  for (uint32_t i = 0; i < n && 19 + 4 * (i + 1) <= r.size(); ++i) out.push_back(load_be32(r.data() + 19 + 4 * i));
  return out;
}

// --- the suite: a private bus, a swtpm, its null key's name -----------------

testing::PrivateBus* g_bus = nullptr;

class ServeAttackTest : public testing::InterposedServeTest {
 protected:
  static void SetUpTestSuite() {
    g_bus = new testing::PrivateBus;
    std::string error = "dbus-daemon did not start";
    ASSERT_TRUE(g_bus->start({}, &error)) << error;
    ::setenv("DBUS_SESSION_BUS_ADDRESS", g_bus->address().c_str(), 1);
    ::unsetenv("TPM2TOOLS_TCTI");
    ::unsetenv("TCTI");
    InterposedServeTest::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    InterposedServeTest::TearDownTestSuite();
    delete g_bus;
    g_bus = nullptr;
  }

  void SetUp() override {
    InterposedServeTest::SetUp();
    ::chmod(dir_.c_str(), 0711);  // user nobody reaches the socket inside, nothing else
  }

  // tpmsec serve on the interposer, on the private bus and a socket whose
  // group (nogroup) lets user nobody connect, as tss lets its members; its
  // stderr in serve.log, named as the journal's stream (JOURNAL_STREAM, as
  // systemd sets it) when `journal`: serve then writes each line's priority.
  void start_serve(bool journal = false) {
    ASSERT_TRUE(testing::wait_for_owner(g_bus->address(), kBusName, false)) << "the bus name is still owned";
    start_serve_with({"--dbus", "session", "--socket-group", "nogroup"}, journal);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(testing::wait_for_owner(g_bus->address(), kBusName, true)) << "tpmsec serve never took the name";
  }
  static std::vector<std::string> tools_env() { return {"TPM2TOOLS_TCTI=tabrmd:bus_type=session"}; }
  // systemd's TPM as the package sets it for every service and shell
  // (packaging/tpm2-env/), its system bus the private one serve is on.
  static std::vector<std::string> shipped_systemd_env() {
    return {"SYSTEMD_TPM2_DEVICE=tabrmd:", "DBUS_SYSTEM_BUS_ADDRESS=" + g_bus->address()};
  }
  static CommandResult tool(const std::vector<std::string>& argv) { return run_command(argv, tools_env()); }
  // tpm2-tools' own swtpm TCTI, straight to the TPM (only while serve is stopped).
  static std::string direct() { return tpm().swtpm.tcti(); }

  // Straight to the swtpm: no loaded or saved session, no transient object.
  void expect_no_handles_left() { testing::expect_no_handles_left(direct()); }
  std::vector<uint32_t> codes() {
    std::vector<uint32_t> out;
    for (const auto& c : commands()) out.push_back(load_be32(c.data() + 6));
    return out;
  }
  // PCR 16 read through serve with tpm2_pcrread.
  Bytes pcr16() {
    auto r = tool({"tpm2_pcrread", "sha256:16", "-o", path("pcr")});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    std::string v = slurp(path("pcr"));
    return Bytes(v.begin(), v.end());
  }
};

// 1a. A passive sniffer on the bus: a sealed secret unsealed and an NV
// index's data written and read through serve never cross it in clear.
TEST_F(ServeAttackTest, ASnifferSeesNeitherTheUnsealedSecretNorTheNvData) {
  const std::string secret = "serve-sealed-secret-6f2a91", nv = "serve-nv-data-0d3b57c1e9";
  const std::string index = "0x1500033";
  std::ofstream(path("secret")) << secret;
  std::ofstream(path("nv")) << nv;
  start_serve();
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}).exit_code, 0);
  auto create =
      tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("s.pub"), "-r", path("s.priv")});
  ASSERT_EQ(create.exit_code, 0) << describe(create);
  auto load =
      tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")});
  ASSERT_EQ(load.exit_code, 0) << describe(load);
  auto unseal = tool({"tpm2_unseal", "-c", path("s.ctx")});
  ASSERT_EQ(unseal.exit_code, 0) << describe(unseal);
  EXPECT_EQ(unseal.out, secret);

  auto def = tool({"tpm2_nvdefine", index, "-C", "o", "-s", std::to_string(nv.size()), "-a", "ownerread|ownerwrite"});
  ASSERT_EQ(def.exit_code, 0) << describe(def);
  auto write = tool({"tpm2_nvwrite", index, "-C", "o", "-i", path("nv")});
  ASSERT_EQ(write.exit_code, 0) << describe(write);
  auto read = tool({"tpm2_nvread", index, "-C", "o", "-s", std::to_string(nv.size())});
  ASSERT_EQ(read.exit_code, 0) << describe(read);
  EXPECT_EQ(read.out, nv);
  EXPECT_EQ(tool({"tpm2_nvundefine", index, "-C", "o"}).exit_code, 0);

  std::vector<uint32_t> seen = codes();
  EXPECT_NE(std::find(seen.begin(), seen.end(), kCcUnseal), seen.end()) << "Unseal never crossed the bus";
  EXPECT_NE(std::find(seen.begin(), seen.end(), kCcNvRead), seen.end()) << "NV_Read never crossed the bus";
  EXPECT_FALSE(contains(bus(), as_bytes(secret))) << "the unsealed secret crossed the bus in clear";
  EXPECT_FALSE(contains(bus(), as_bytes(nv))) << "the NV data crossed the bus in clear";
}

// 1b. An altered response: a byte of a response parameter flipped (Unseal's
// secret, GetRandom's bytes) or of a write's answer (NV_Write: its response
// HMAC). The tool fails, prints nothing of the secret, and the write is
// never reported done.
TEST_F(ServeAttackTest, AnAlteredResponseFailsTheTool) {
  const std::string secret = "serve-altered-secret-2c7e", nv = "serve-altered-nv-91b4";
  const std::string index = "0x1500034";
  std::ofstream(path("secret")) << secret;
  std::ofstream(path("nv")) << nv;
  start_serve();
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}).exit_code, 0);
  ASSERT_EQ(
      tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("s.pub"), "-r", path("s.priv")})
          .exit_code,
      0);
  ASSERT_EQ(tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")})
                .exit_code,
            0);
  ASSERT_EQ(tool({"tpm2_nvdefine", index, "-C", "o", "-s", std::to_string(nv.size()), "-a", "ownerread|ownerwrite"})
                .exit_code,
            0);
  // Flips the first byte after the response's parameterSize (with sessions)
  // or header (without): a parameter byte, never the header.
  std::atomic<int> altered{0};
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    auto r = tpm.transmit(c.bytes);
    if (!r.ok()) return testing::Reply::close();
    Bytes forged = *r;
    bool target = c.code == kCcUnseal || c.code == kCcGetRandom || c.code == kCcNvWrite;
    if (target && rc_of(forged) == 0 && forged.size() > 16) {
      forged[load_be16(forged.data()) == st::kSessions ? 14 : 10] ^= 0x01;
      if (c.code == kCcNvWrite) forged[forged.size() - 1] ^= 0x01;  // no parameters: its response HMAC
      ++altered;
    }
    return testing::Reply::answer(forged);
  });
  auto unseal = tool({"tpm2_unseal", "-c", path("s.ctx")});
  EXPECT_NE(unseal.exit_code, 0) << describe(unseal);
  EXPECT_EQ(unseal.out.find(secret), std::string::npos);
  EXPECT_EQ(unseal.out, "");
  auto random = tool({"tpm2_getrandom", "--hex", "16"});
  EXPECT_NE(random.exit_code, 0) << describe(random);
  EXPECT_EQ(random.out, "");
  auto write = tool({"tpm2_nvwrite", index, "-C", "o", "-i", path("nv")});
  EXPECT_NE(write.exit_code, 0) << "a write whose answer was altered was reported done: " << describe(write);
  EXPECT_EQ(altered.load(), 3);
  // The attack over, serve serves on: its session started again (its salt
  // key loaded again, under a handle number a client's space gave out before).
  set_rule(nullptr);
  auto after = tool({"tpm2_getrandom", "--hex", "16"});
  EXPECT_EQ(after.exit_code, 0) << "serve stopped serving after the attack: " << describe(after);
  auto undefine = tool({"tpm2_nvundefine", index, "-C", "o"});
  EXPECT_EQ(undefine.exit_code, 0) << describe(undefine);
  EXPECT_FALSE(contains(bus(), as_bytes(secret)));
}

// 1b. Issue 31's attack through serve: every unauthenticated name read
// (a plain ReadPublic or NV_ReadPublic) answered TPM_RC_HANDLE by the
// interposer. No tool exits 0; Unseal, NV_Read and NV_Write never reach the
// TPM; the index keeps what it held. The object and index are made by one
// server and attacked through a fresh one, which has no name cached.
TEST_F(ServeAttackTest, AForgedErrorOnTheNameReadNeverLetsACommandRunWithoutTheSession) {
  const std::string secret = "serve-forger-secret-5e17", nv = "serve-forger-nv-data-a2c0";
  const std::string index = "0x1500035", persistent = "0x81010035";
  std::ofstream(path("secret")) << secret;
  std::ofstream(path("nv")) << nv;
  start_serve();
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}).exit_code, 0);
  ASSERT_EQ(
      tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("s.pub"), "-r", path("s.priv")})
          .exit_code,
      0);
  ASSERT_EQ(tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")})
                .exit_code,
            0);
  ASSERT_EQ(tool({"tpm2_evictcontrol", "-C", "o", "-c", path("s.ctx"), persistent}).exit_code, 0);
  ASSERT_EQ(tool({"tpm2_nvdefine", index, "-C", "o", "-s", std::to_string(nv.size()), "-a", "ownerread|ownerwrite"})
                .exit_code,
            0);
  ASSERT_EQ(tool({"tpm2_nvwrite", index, "-C", "o", "-i", path("nv")}).exit_code, 0);
  ASSERT_EQ(stop_serve(), 0);
  start_serve();
  size_t from = commands().size();
  set_rule([](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    bool plain = c.bytes.size() >= 2 && load_be16(c.bytes.data()) == st::kNoSessions;
    if (plain && (c.code == 0x173 || c.code == 0x169)) return testing::Reply::answer(error_frame(0x18B));
    return testing::pass(c, tpm);
  });
  auto unseal = tool({"tpm2_unseal", "-c", persistent});
  EXPECT_NE(unseal.exit_code, 0) << describe(unseal);
  EXPECT_EQ(unseal.out.find(secret), std::string::npos);
  auto read = tool({"tpm2_nvread", index, "-C", "o", "-s", std::to_string(nv.size())});
  EXPECT_NE(read.exit_code, 0) << describe(read);
  EXPECT_EQ(read.out.find(nv), std::string::npos);
  std::ofstream(path("other")) << std::string(nv.size(), 'X');
  auto write = tool({"tpm2_nvwrite", index, "-C", "o", "-i", path("other")});
  EXPECT_NE(write.exit_code, 0) << describe(write);
  auto seen = codes();
  for (size_t i = from; i < seen.size(); ++i) {
    EXPECT_NE(seen[i], kCcUnseal) << "Unseal reached the TPM";
    EXPECT_NE(seen[i], kCcNvRead) << "NV_Read reached the TPM";
    EXPECT_NE(seen[i], kCcNvWrite) << "NV_Write reached the TPM";
  }
  set_rule(nullptr);
  ASSERT_EQ(stop_serve(), 0);
  auto plain = run_command({"tpm2_nvread", "-T", direct(), index, "-C", "o", "-s", std::to_string(nv.size())});
  EXPECT_EQ(plain.out, nv) << "the index changed";
  EXPECT_FALSE(contains(bus(), as_bytes(secret)));
  EXPECT_FALSE(contains(bus(), as_bytes(nv)));
  run_command({"tpm2_nvundefine", "-T", direct(), index, "-C", "o"});
  run_command({"tpm2_evictcontrol", "-T", direct(), "-C", "o", "-c", persistent});
  expect_no_handles_left();
}

// 1c. tpm2_pcrextend sends PCR_Extend under the password session; through
// serve the bus carries it under tpmsec's HMAC session, and the one session
// serve started serves every run: one StartAuthSession since serve started,
// over three tools.
TEST_F(ServeAttackTest, PcrExtendCarriesTheServersOneHmacSession) {
  start_serve();
  Bytes before = pcr16();
  Bytes digest(32, 0x5c);
  for (int i = 0; i < 3; ++i) {
    auto ext = tool({"tpm2_pcrextend", "16:sha256=" + to_hex(digest)});
    ASSERT_EQ(ext.exit_code, 0) << describe(ext);
  }
  Bytes expected = before;
  for (int i = 0; i < 3; ++i) expected = *pcr_extended_value(alg::kSha256, expected, digest);
  EXPECT_EQ(pcr16(), expected);
  size_t starts = 0, extends = 0;
  for (const auto& c : commands()) {
    uint32_t code = load_be32(c.data() + 6);
    if (code == kCcStartAuthSession) ++starts;
    if (code != kCcPcrExtend) continue;
    ++extends;
    auto parsed = testing::parse_command(c);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message();
    ASSERT_EQ(parsed->sessions.size(), 1u);
    EXPECT_EQ(parsed->sessions[0].handle >> 24, ht::kHmacSession)
        << "PCR_Extend crossed the bus under " << std::hex << parsed->sessions[0].handle;
    EXPECT_NE(parsed->sessions[0].handle, rh::kPasswordSession);
    EXPECT_EQ(parsed->sessions[0].hmac.size(), 32u);
  }
  EXPECT_EQ(extends, 3u);
  EXPECT_EQ(starts, 1u) << "StartAuthSession on the bus since serve started";
}

// The lines of stderr that are not serve's log ("tpmsec serve: …"): the error.
long error_lines(const std::string& err) {
  std::istringstream lines(err);
  long n = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.rfind("tpmsec serve: ", 0) != 0) ++n;
  }
  return n;
}

// 1b. A rewritten command: the interposer swaps PCR_Extend's digest on its
// way to the TPM. The TPM refuses the server's HMAC, the tool fails, and
// the PCR holds neither digest.
TEST_F(ServeAttackTest, ASwappedExtendDigestFailsTheToolAndNeverReachesThePcr) {
  start_serve();
  Bytes before = pcr16();
  Bytes digest(32, 0xd1), forged(32, 0xe7);
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    Bytes frame = c.bytes;
    if (c.code == kCcPcrExtend) {
      auto at = std::search(frame.begin(), frame.end(), digest.begin(), digest.end());
      if (at != frame.end()) std::copy(forged.begin(), forged.end(), at);
    }
    auto r = tpm.transmit(frame);
    return r.ok() ? testing::Reply::answer(*r) : testing::Reply::close();
  });
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + to_hex(digest)});
  EXPECT_NE(ext.exit_code, 0) << describe(ext);
  set_rule(nullptr);
  EXPECT_EQ(pcr16(), before);
}

// A response lost on the bus: the interposer forwards PCR_Extend and
// closes the connection instead of answering. The tool fails, and the PCR,
// read straight from the TPM once serve stopped, is extended once: serve
// never sent the command again on its new connection; and serve goes on
// serving (its session retired, a new one for the next command).
TEST_F(ServeAttackTest, ALostResponseFailsTheToolAndExtendsOnce) {
  start_serve();
  Bytes before = pcr16();
  Bytes digest(32, 0xa5);
  std::atomic<bool> dropped{false};
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    auto r = tpm.transmit(c.bytes);
    if (!r.ok() || (c.code == kCcPcrExtend && !dropped.exchange(true))) return testing::Reply::close();
    return testing::Reply::answer(*r);
  });
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + to_hex(digest)});
  EXPECT_NE(ext.exit_code, 0) << describe(ext);
  EXPECT_TRUE(dropped.load());
  // The server's session may have moved on with the lost command: it is
  // retired, and the next client's command goes out on a new one.
  auto random = tool({"tpm2_getrandom", "8", "--hex"});
  EXPECT_EQ(random.exit_code, 0) << describe(random);
  int status = stop_serve();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto read = run_command({"tpm2_pcrread", "-T", direct(), "sha256:16", "-o", path("direct")});
  ASSERT_EQ(read.exit_code, 0) << describe(read);
  std::string after = slurp(path("direct"));
  EXPECT_EQ(Bytes(after.begin(), after.end()), *pcr_extended_value(alg::kSha256, before, digest));
  expect_no_handles_left();
}

// 2. Fails closed: an anchor that is not the TPM's null key is an integrity
// failure (exit 3). (With no anchor named, serve stands on the order of
// protect.h's StandingAnchor instead: serve_anchor_test.cc.)
TEST_F(ServeAttackTest, TheWrongAnchorRefusesToStart) {
  std::string wrong = tpm().null_name;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  auto bad = testing::run_tpmsec({"serve", "--allow-root", "--tpm", proxy_->spec(), "--null-name", wrong, "--dbus",
                                  "none", "--socket", socket_path()});
  EXPECT_EQ(bad.exit_code, testing::kExitIntegrity) << describe(bad);
  EXPECT_EQ(error_lines(bad.err), 1) << bad.err;
  EXPECT_FALSE(fs::exists(socket_path()));
  proxy_->wait_idle();
  expect_no_handles_left();
}

// 3. Another uid on the socket (mode 0660, group nogroup: user nobody may
// connect, as a member of tss may to /dev/tpmrm0) cannot list, use, save
// or flush the first client's policy session or its key; the first
// client's session is untouched by all of it (its policy digest still
// empty) and its key still signs.
TEST_F(ServeAttackTest, AnotherUidCannotReachTheFirstClientsHandles) {
  ASSERT_EQ(::geteuid(), 0u) << "the test runs as root (as CI does): it also runs a client as nobody";
  start_serve();
  struct stat st {};
  ASSERT_EQ(::stat(socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, kNobody);
  int a = connect_unix(socket_path());
  ASSERT_GE(a, 0);
  Bytes started = transact(a, start_auth_session(0x01));  // TPM_SE_POLICY
  ASSERT_EQ(rc_of(started), 0u) << to_hex(started);
  ASSERT_GE(started.size(), 14u);
  const uint32_t session = load_be32(started.data() + 10);
  Bytes created = transact(a, create_hmac_primary());
  ASSERT_EQ(rc_of(created), 0u) << to_hex(created);
  const uint32_t key = load_be32(created.data() + 10);
  ASSERT_EQ(rc_of(transact(a, hmac_with(key))), 0u) << "the first client cannot use its own key";
  auto a_objects = listed_handles(transact(a, get_handles(0x80000000)));
  EXPECT_NE(std::find(a_objects.begin(), a_objects.end(), key), a_objects.end());
  Bytes a_lists = transact(a, get_handles(0x02000000));
  auto a_sees = listed_handles(a_lists);
  EXPECT_NE(std::find(a_sees.begin(), a_sees.end(), session), a_sees.end()) << to_hex(a_lists);

  // What user nobody sends, prepared before the fork (the child allocates nothing).
  const std::vector<Bytes> attempts = {get_handles(0x02000000),
                                       get_handles(0x03000000),
                                       get_handles(0x80000000),
                                       with_handle(kCcPolicyGetDigest, session),
                                       policy_command_code(session, kCcUnseal),
                                       with_handle(kCcContextSave, session),
                                       flush_context(session),
                                       read_public(key),
                                       hmac_with(key),
                                       with_handle(kCcContextSave, key),
                                       flush_context(key)};
  const std::string sock = socket_path();
  // Runs the attempts as uid nobody with group `gid` in a forked child:
  // [0] 1 when it connected; then per attempt its response code (for a
  // listing, 0x70000000 | the number of handles listed).
  auto as_nobody = [&](gid_t gid) {
    std::array<uint32_t, 12> got{};
    int pipefd[2];
    if (::pipe(pipefd) != 0) return got;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pipefd[0]);
      std::array<uint32_t, 12> out{};
      static uint8_t buf[4096];
      if (::setgroups(0, nullptr) == 0 && ::setgid(gid) == 0 && ::setuid(kNobody) == 0 && ::getuid() == kNobody) {
        int b = connect_unix(sock);
        if (b >= 0) {
          out[0] = 1;
          for (size_t i = 0; i < attempts.size(); ++i) {
            size_t n = transact(b, attempts[i], buf, sizeof(buf));
            uint32_t rc = n >= 10 ? load_be32(buf + 6) : 0xFFFFFFFFu;
            if (i < 3 && rc == 0 && n >= 19) rc = 0x70000000u | load_be32(buf + 15);
            out[1 + i] = rc;
          }
        }
      }
      (void)!::write(pipefd[1], out.data(), sizeof(out));
      ::_exit(0);
    }
    ::close(pipefd[1]);
    if (::read(pipefd[0], got.data(), sizeof(got)) != static_cast<ssize_t>(sizeof(got))) got[0] = 0xFFFFFFFFu;
    ::close(pipefd[0]);
    ::waitpid(pid, nullptr, 0);
    return got;
  };
  // Not in the socket's group: the file's mode refuses the connection.
  EXPECT_EQ(as_nobody(kNobody - 1)[0], 0u) << "a user outside the socket's group connected";
  std::array<uint32_t, 12> got = as_nobody(kNobody);
  ASSERT_EQ(got[0], 1u) << "user nobody could not connect to the 0660 nogroup socket";
  EXPECT_EQ(got[1], 0x70000000u) << "nobody's listing of loaded sessions is not empty: " << std::hex << got[1];
  EXPECT_EQ(got[2], 0x70000000u) << "nobody's listing of saved sessions is not empty: " << std::hex << got[2];
  EXPECT_EQ(got[3], 0x70000000u) << "nobody's listing of transient objects is not empty: " << std::hex << got[3];
  EXPECT_NE(got[4], 0u) << "nobody read the policy digest of the first client's session";
  EXPECT_NE(got[5], 0u) << "nobody extended the first client's policy session";
  EXPECT_NE(got[6], 0u) << "nobody saved the first client's session";
  EXPECT_NE(got[7], 0u) << "nobody flushed the first client's session";
  EXPECT_NE(got[8], 0u) << "nobody read the first client's object";
  EXPECT_NE(got[9], 0u) << "nobody used the first client's key";
  EXPECT_NE(got[10], 0u) << "nobody saved the first client's object";
  EXPECT_NE(got[11], 0u) << "nobody flushed the first client's object";

  // The first client's session is still its own, its digest still empty.
  Bytes digest = transact(a, with_handle(kCcPolicyGetDigest, session));
  ASSERT_EQ(rc_of(digest), 0u) << to_hex(digest);
  ASSERT_EQ(digest.size(), 10u + 2 + 32);
  EXPECT_EQ(Bytes(digest.begin() + 12, digest.end()), Bytes(32, 0)) << "another uid's PolicyCommandCode landed";
  EXPECT_EQ(rc_of(transact(a, hmac_with(key))), 0u) << "the first client's key is gone";
  EXPECT_EQ(rc_of(transact(a, flush_context(session))), 0u);
  EXPECT_EQ(rc_of(transact(a, flush_context(key))), 0u);
  ::close(a);
}

// 4. A tool killed (SIGKILL) while its CreatePrimary is on the bus, and raw
// clients that die with half a frame sent or an answer unread: serve flushes
// what they made, keeps serving, and leaves nothing when it stops.
TEST_F(ServeAttackTest, ClientsThatDieMidCommandLeaveNothingBehind) {
  start_serve();
  const size_t from = commands().size();
  std::atomic<bool> on_the_bus{false};
  set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    testing::Reply reply = testing::pass(c, tpm);
    if (c.code == kCcCreatePrimary) {
      on_the_bus = true;
      reply.delay = std::chrono::milliseconds(1500);  // the tool is killed meanwhile
    }
    return reply;
  });
  testing::Child victim;
  victim.pid = testing::spawn({"tpm2_createprimary", "-C", "o", "-G", "ecc", "-c", path("killed.ctx")}, tools_env());
  for (auto end = Clock::now() + kDeadline; !on_the_bus && Clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(on_the_bus.load()) << "the tool's CreatePrimary never reached the bus";
  ::kill(victim.pid, SIGKILL);
  ::waitpid(victim.pid, nullptr, 0);
  victim.pid = -1;
  set_rule(nullptr);

  // Raw clients on the socket, each a process that is gone (its space is
  // its connection's): one sends a header that promises a 64-byte command
  // and 4 bytes of it, and dies; one starts a session and dies before
  // reading the answer.
  {
    int half = testing::connect_from_exited_process(socket_path());
    ASSERT_GE(half, 0);
    Bytes header = {0x80, 0x01, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x01, 0x7b, 0x00, 0x08, 0x00, 0x00};
    ASSERT_EQ(::send(half, header.data(), header.size(), MSG_NOSIGNAL), static_cast<ssize_t>(header.size()));
    ::close(half);
    int unread = testing::connect_from_exited_process(socket_path());
    ASSERT_GE(unread, 0);
    Bytes start = start_auth_session(0x00);
    ASSERT_EQ(::send(unread, start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
    // Until the session's answer came back from the TPM, then gone.
    for (auto end = Clock::now() + kDeadline; Clock::now() < end;) {
      auto cs = codes();
      if (std::count(cs.begin(), cs.end(), kCcStartAuthSession) >= 2) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::close(unread);
  }

  // Whatever the TPM made for the dead (since serve started: the killed
  // tool's object and any session it started, the raw client's session),
  // each flushed on the bus after it was made, while serve runs on.
  struct Made {
    size_t at;
    uint32_t handle;
  };
  auto unflushed = [&] {
    std::vector<Made> out;
    auto cs = commands();
    auto rs = responses();
    size_t made = 0;
    for (size_t i = from; i < cs.size() && i < rs.size(); ++i) {
      uint32_t code = load_be32(cs[i].data() + 6);
      // The server's own: its salt key (a primary in the null hierarchy) and
      // its session salted with it. The clients': a primary in the owner
      // hierarchy, unsalted sessions.
      uint32_t first_handle = cs[i].size() >= 14 ? load_be32(cs[i].data() + 10) : 0;
      bool clients = (code == kCcCreatePrimary && first_handle == rh::kOwner) ||
                     (code == kCcStartAuthSession && first_handle == rh::kNull);
      if (clients && rc_of(rs[i]) == 0 && rs[i].size() >= 14) {
        ++made;
        uint32_t h = load_be32(rs[i].data() + 10);
        bool gone = false;
        for (size_t j = i + 1; j < cs.size() && !gone; ++j) {
          gone =
              load_be32(cs[j].data() + 6) == kCcFlushContext && cs[j].size() >= 14 && load_be32(cs[j].data() + 10) == h;
        }
        if (!gone) out.push_back({i, h});
      }
    }
    if (made < 2) out.push_back({0, 0});  // not everything was made yet
    return out;
  };
  for (auto end = Clock::now() + kDeadline; !unflushed().empty() && Clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const Made& m : unflushed()) {
    ADD_FAILURE() << "made for a dead client and never flushed: 0x" << std::hex << m.handle << " (bus command "
                  << std::dec << m.at << ")";
  }

  // A fresh client is served and sees nothing of theirs.
  auto random = tool({"tpm2_getrandom", "--hex", "8"});
  EXPECT_EQ(random.exit_code, 0) << describe(random);
  for (const char* kind : {"handles-transient", "handles-loaded-session", "handles-saved-session"}) {
    auto left = tool({"tpm2_getcap", kind});
    EXPECT_EQ(left.exit_code, 0) << describe(left);
    EXPECT_EQ(left.out, "") << kind;
  }
  // TearDown: serve stops with 0 and the TPM, read directly, holds nothing.
}

// 5. Sixteen tools at once, each extending PCR 16 by the same digest and
// reading random bytes: all succeed and the PCR holds every extend. Then
// SIGTERM while sixteen loops that also create primaries run: serve exits 0
// and the TPM, read directly, holds nothing it or they made.
TEST_F(ServeAttackTest, SixteenClientsAtOnceThenSigtermUnderLoad) {
  constexpr int kClients = 16, kRounds = 3;
  start_serve();
  Bytes before = pcr16();
  Bytes digest(32, 0x16);
  const std::string loop = "for n in $(seq " + std::to_string(kRounds) +
                           "); do tpm2_pcrextend 16:sha256=" + to_hex(digest) +
                           " && tpm2_getrandom --hex 8 >/dev/null || exit 1; done";
  std::vector<CommandResult> results(kClients);
  {
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] { results[i] = run_command({"sh", "-c", loop}, tools_env()); });
    }
    for (auto& t : threads) t.join();
  }
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << describe(r);
  Bytes expected = before;
  for (int i = 0; i < kClients * kRounds; ++i) expected = *pcr_extended_value(alg::kSha256, expected, digest);
  EXPECT_EQ(pcr16(), expected) << "the PCR is not the value of all " << kClients * kRounds << " extends";

  // Under load: SIGTERM once the loops have put commands on the bus.
  std::vector<std::thread> load;
  for (int i = 0; i < kClients; ++i) {
    std::string ctx = path("p" + std::to_string(i) + ".ctx");
    load.emplace_back([&, ctx] {
      const std::string busy = "for n in $(seq 50); do [ -e " + path("stop") +
                               " ] && exit 0; tpm2_createprimary -C o -G ecc -c " + ctx +
                               " >/dev/null 2>&1; tpm2_getrandom --hex 8 >/dev/null 2>&1; done";
      run_command({"sh", "-c", busy}, tools_env());
    });
  }
  size_t at = commands().size();
  for (auto end = Clock::now() + kDeadline; commands().size() < at + 60 && Clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(commands().size(), at + 60) << "the load never reached the bus";
  const int status = serve_->stop();
  serve_started_ = false;
  std::ofstream(path("stop")) << "";
  for (auto& t : load) t.join();
  proxy_->wait_idle();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "tpmsec serve ended under load with " << status;
  expect_no_handles_left();
}

// 6. tpm2-openssl's provider and systemd-creds through serve (the tabrmd
// TCTI on the private bus): random bytes and the credential never cross the
// bus in clear.
TEST_F(ServeAttackTest, Tpm2OpensslAndSystemdCredsWorkThroughIt) {
  start_serve();
  std::vector<std::string> env = {"TPM2OPENSSL_TCTI=tabrmd:bus_type=session"};
  auto rand = run_command({"openssl", "rand", "-provider", "tpm2", "-provider", "default", "-hex", "16"}, env);
  ASSERT_EQ(rand.exit_code, 0) << describe(rand);
  auto bytes = from_hex(std::string(rand.out.substr(0, 32)));
  ASSERT_TRUE(bytes.ok()) << rand.out;
  EXPECT_FALSE(contains(bus(), *bytes)) << "the random bytes crossed the bus in clear";
  std::ofstream(path("msg")) << "signed in the TPM through tpmsec serve\n";
  auto gen = run_command({"openssl", "genpkey", "-provider", "tpm2", "-provider", "default", "-algorithm", "EC",
                          "-pkeyopt", "group:P-256", "-out", path("key.pem")},
                         env);
  ASSERT_EQ(gen.exit_code, 0) << describe(gen);
  auto pub = run_command({"openssl", "pkey", "-provider", "tpm2", "-provider", "default", "-in", path("key.pem"),
                          "-pubout", "-out", path("pub.pem")},
                         env);
  ASSERT_EQ(pub.exit_code, 0) << describe(pub);
  auto sign = run_command({"openssl", "pkeyutl", "-provider", "tpm2", "-provider", "default", "-sign", "-inkey",
                           path("key.pem"), "-rawin", "-digest", "sha256", "-in", path("msg"), "-out", path("sig")},
                          env);
  ASSERT_EQ(sign.exit_code, 0) << describe(sign);
  auto verify = run_command({"openssl", "pkeyutl", "-verify", "-pubin", "-inkey", path("pub.pem"), "-rawin", "-digest",
                             "sha256", "-in", path("msg"), "-sigfile", path("sig")});
  EXPECT_EQ(verify.exit_code, 0) << describe(verify);

  // systemd 252 reads SYSTEMD_TPM2_DEVICE=DRIVER:CONF when no --tpm2-device
  // is given, and loads libtss2-tcti-DRIVER.so.0: the value the package
  // ships, `tabrmd:` (the system bus, which DBUS_SYSTEM_BUS_ADDRESS names
  // here: the private bus serve is on).
  const std::string secret = "serve-credential-3a9d0f";
  std::ofstream(path("plain")) << secret;
  const size_t from = commands().size();
  auto enc =
      run_command({"systemd-creds", "encrypt", "--with-key=tpm2", "--name=tpmsec-serve", path("plain"), path("cred")},
                  shipped_systemd_env());
  ASSERT_EQ(enc.exit_code, 0) << describe(enc);
  auto dec = run_command({"systemd-creds", "decrypt", "--name=tpmsec-serve", path("cred"), "-"}, shipped_systemd_env());
  ASSERT_EQ(dec.exit_code, 0) << describe(dec);
  EXPECT_EQ(dec.out, secret);
  EXPECT_FALSE(contains(bus(), as_bytes(secret))) << "the credential crossed the bus in clear";
  // Through serve: the TPM behind it sealed the key (Create) and unsealed it.
  std::vector<uint32_t> since = codes();
  since.erase(since.begin(), since.begin() + static_cast<std::ptrdiff_t>(from));
  EXPECT_NE(std::find(since.begin(), since.end(), kCcCreate), since.end()) << "no Create reached the TPM";
  EXPECT_NE(std::find(since.begin(), since.end(), kCcUnseal), since.end()) << "no Unseal reached the TPM";
}

// 7. systemd-cryptenroll --tpm2-device=auto with the device the package
// ships (SYSTEMD_TPM2_DEVICE=tabrmd:) enrolls a LUKS2 image through serve:
// the volume key is sealed (Create) by the TPM behind it, and the image
// gets its systemd-tpm2 token.
TEST_F(ServeAttackTest, SystemdCryptenrollEnrollsThroughItWithTheShippedDevice) {
  start_serve();
  const std::string image = path("volume.img");
  std::ofstream(image).close();
  fs::resize_file(image, 20 << 20);
  const std::string passphrase = "volume-passphrase";
  auto format = run_command({"cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
                             "--pbkdf-force-iterations", "1000", "--key-file=-", image},
                            {}, &passphrase);
  ASSERT_EQ(format.exit_code, 0) << describe(format);
  const size_t from = commands().size();
  std::vector<std::string> env = shipped_systemd_env();
  env.push_back("PASSWORD=" + passphrase);
  auto enroll = run_command({"systemd-cryptenroll", "--tpm2-device=auto", "--tpm2-pcrs=", image}, env);
  ASSERT_EQ(enroll.exit_code, 0) << describe(enroll);
  auto dump = run_command({"cryptsetup", "luksDump", image});
  EXPECT_NE(dump.out.find("systemd-tpm2"), std::string::npos) << describe(dump);
  std::vector<uint32_t> since = codes();
  since.erase(since.begin(), since.begin() + static_cast<std::ptrdiff_t>(from));
  EXPECT_NE(std::find(since.begin(), since.end(), kCcCreate), since.end()) << "no Create reached the TPM";
}

// --- issue 38: nothing a client sends changes what serves another ----------

// A neighbour: frames sent as user nobody (group nogroup, the socket's) from
// a forked child, one after another, each answer's response code kept
// (0xFFFFFFFF: no answer; the child then connects again). The frames are
// built before the fork: the child allocates nothing.
class Neighbour {
 public:
  Neighbour(std::string socket, std::vector<Bytes> frames) : socket_(std::move(socket)), frames_(std::move(frames)) {}
  ~Neighbour() { (void)finish(); }

  bool start() {
    if (::pipe(pipe_) != 0) return false;
    pid_ = ::fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) run();
    ::close(pipe_[1]);
    return true;
  }
  // Every frame's response code, in order.
  std::vector<uint32_t> finish() {
    std::vector<uint32_t> codes;
    if (pid_ <= 0) return codes;
    uint32_t rc = 0;
    while (::read(pipe_[0], &rc, sizeof(rc)) == static_cast<ssize_t>(sizeof(rc))) codes.push_back(rc);
    ::close(pipe_[0]);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return codes;
  }

 private:
  [[noreturn]] void run() {
    ::close(pipe_[0]);
    static uint8_t buf[4096];
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(1);
    int fd = connect_unix(socket_);
    for (const Bytes& f : frames_) {
      size_t n = fd < 0 ? 0 : transact(fd, f, buf, sizeof(buf));
      uint32_t rc = n >= 10 ? load_be32(buf + 6) : 0xFFFFFFFFu;
      if (n < 10) {
        if (fd >= 0) ::close(fd);
        fd = connect_unix(socket_);
      }
      if (::write(pipe_[1], &rc, sizeof(rc)) != static_cast<ssize_t>(sizeof(rc))) ::_exit(1);
    }
    ::_exit(0);
  }

  std::string socket_;
  std::vector<Bytes> frames_;
  int pipe_[2] = {-1, -1};
  pid_t pid_ = -1;
};

// The handle a client's own (unsalted, unbound: tpmKey and bind TPM_RH_NULL)
// StartAuthSession got, the last one on the bus; 0 when none.
uint32_t clients_last_session(const std::vector<Bytes>& commands, const std::vector<Bytes>& responses) {
  uint32_t h = 0;
  for (size_t i = 0; i < commands.size() && i < responses.size(); ++i) {
    const Bytes& c = commands[i];
    if (c.size() < 18 || load_be32(c.data() + 6) != kCcStartAuthSession) continue;
    if (load_be32(c.data() + 10) != rh::kNull || load_be32(c.data() + 14) != rh::kNull) continue;
    if (rc_of(responses[i]) == 0 && responses[i].size() >= 14) h = load_be32(responses[i].data() + 10);
  }
  return h;
}

bool names_handle(const testing::CommandFrame& f, uint32_t h) {
  if (std::find(f.handles.begin(), f.handles.end(), h) != f.handles.end()) return true;
  return std::any_of(f.sessions.begin(), f.sessions.end(), [h](const auto& e) { return e.handle == h; });
}

// Every frame a neighbour could send naming `victim` (another client's
// session): in each handle position of every Policy* command and of
// ContextSave, in each slot of the authorization area with a junk HMAC,
// as FlushContext's handle and a ContextLoad's saved handle, and each bus
// command that carried it replayed with only its own entries left.
std::vector<Bytes> frames_naming(uint32_t victim, const std::vector<Bytes>& seen) {
  std::vector<Bytes> out;
  for (const CommandInfo& c : kCommandTable) {
    if (!c.name.starts_with("Policy") && c.code != kCcContextSave) continue;
    for (size_t i = 0; i < c.handle_count; ++i) {
      testing::CommandFrame f{.code = c.code};
      for (size_t k = 0; k < c.handle_count; ++k) f.handles.push_back(k == i ? victim : rh::kOwner);
      f.parameters = Bytes(34, 0);
      f.parameters[1] = 32;  // a 32-byte TPM2B first: a digest, a nonce
      out.push_back(testing::build_command(f));
    }
  }
  const testing::SessionEntry junk{victim, Bytes(32, 0xa5), attr::kContinueSession, Bytes(32, 0x5a)};
  const testing::SessionEntry password{rh::kPasswordSession, {}, attr::kContinueSession, {}};
  for (size_t slot = 0; slot < 3; ++slot) {
    testing::CommandFrame random{.code = kCcGetRandom, .parameters = {0x00, 0x08}};
    testing::CommandFrame extend{.code = kCcPcrExtend, .handles = {16}, .parameters = {0, 0, 0, 0}};
    for (size_t k = 0; k <= slot; ++k) {
      random.sessions.push_back(k == slot ? junk : password);
      extend.sessions.push_back(k == slot ? junk : password);
    }
    out.push_back(testing::build_command(random));
    out.push_back(testing::build_command(extend));
  }
  out.push_back(flush_context(victim));
  Writer context;  // TPMS_CONTEXT: sequence, savedHandle, hierarchy, contextBlob
  context.u64(1);
  context.u32(victim);
  context.u32(rh::kOwner);
  context.tpm2b(Bytes(64, 0x77), "contextBlob");
  out.push_back(testing::no_sessions_command(0x161, [&](Writer& w) { w.bytes(*context.finish()); }));
  for (const Bytes& b : seen) {
    auto f = testing::parse_command(b);
    if (!f.ok() || !names_handle(*f, victim)) continue;
    std::erase_if(f->sessions, [&](const auto& e) { return e.handle != victim && e.handle != rh::kPasswordSession; });
    out.push_back(testing::build_command(*f));
  }
  return out;
}

// 7. Issue 38's attack: user nobody names the first client's session once —
// in every position a handle can take, with junk HMACs, replaying its own
// frames — and every frame is refused; the first client's next commands
// under that session still go out encrypted and re-signed: neither the
// unsealed secret nor a new object's sensitive data ever crosses the bus.
TEST_F(ServeAttackTest, ANeighbourNamingAClientsSessionNeverTurnsOffItsProtection) {
  ASSERT_EQ(::geteuid(), 0u) << "the test runs as root (as CI does): it also runs a client as nobody";
  const std::string secret = "neighbour-sealed-secret-7d1c", later = "neighbour-new-sensitive-e24b";
  std::ofstream(path("secret")) << secret;
  std::ofstream(path("later")) << later;
  start_serve();
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}).exit_code, 0);
  ASSERT_EQ(
      tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("s.pub"), "-r", path("s.priv")})
          .exit_code,
      0);
  ASSERT_EQ(tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")})
                .exit_code,
            0);
  auto started = tool({"tpm2_startauthsession", "--hmac-session", "-S", path("session.ctx")});
  ASSERT_EQ(started.exit_code, 0) << describe(started);
  const uint32_t victim = clients_last_session(commands(), responses());
  ASSERT_NE(victim, 0u) << "the client's StartAuthSession never crossed the bus";

  std::vector<Bytes> frames = frames_naming(victim, commands());
  ASSERT_GT(frames.size(), 40u);
  Neighbour nobody(socket_path(), frames);
  ASSERT_TRUE(nobody.start());
  std::vector<uint32_t> got = nobody.finish();
  ASSERT_EQ(got.size(), frames.size()) << "user nobody's frames were not all answered";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NE(got[i], 0u) << "a frame naming the first client's session succeeded: " << to_hex(frames[i]);
    EXPECT_NE(got[i], 0xFFFFFFFFu) << "no answer to " << to_hex(frames[i]);
  }

  const std::string auth = "session:" + path("session.ctx");
  auto unseal = tool({"tpm2_unseal", "-c", path("s.ctx"), "-p", auth});
  ASSERT_EQ(unseal.exit_code, 0) << describe(unseal);
  EXPECT_EQ(unseal.out, secret);
  auto create = tool({"tpm2_create", "-C", path("prim.ctx"), "-P", auth, "-i", path("later"), "-u", path("l.pub"), "-r",
                      path("l.priv")});
  ASSERT_EQ(create.exit_code, 0) << describe(create);
  EXPECT_FALSE(contains(bus(), as_bytes(secret))) << "the unsealed secret crossed the bus in clear";
  EXPECT_FALSE(contains(bus(), as_bytes(later))) << "the new object's sensitive data crossed the bus in clear";
  EXPECT_EQ(tool({"tpm2_flushcontext", path("session.ctx")}).exit_code, 0);
}

// A frame from a client's bytes with some of it changed: a handle or a
// session entry's handle swapped for one of `handles`, a nonce, an HMAC or
// a parameter byte altered, or a session entry dropped. Its size stays
// true, so the server reads it whole and answers it.
Bytes mutated(const testing::CommandFrame& base, const std::vector<uint32_t>& handles, std::mt19937& rng) {
  testing::CommandFrame f = base;
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  for (int changes = 1 + static_cast<int>(pick(3)); changes > 0; --changes) {
    switch (pick(5)) {
      case 0:
        if (!f.handles.empty()) f.handles[pick(f.handles.size())] = handles[pick(handles.size())];
        break;
      case 1:
        if (!f.sessions.empty()) f.sessions[pick(f.sessions.size())].handle = handles[pick(handles.size())];
        break;
      case 2:
        if (!f.sessions.empty()) {
          auto& e = f.sessions[pick(f.sessions.size())];
          Bytes& field = pick(2) ? e.hmac : e.nonce;
          if (!field.empty()) field[pick(field.size())] ^= static_cast<uint8_t>(1 + pick(255));
        }
        break;
      case 3:
        if (!f.parameters.empty()) f.parameters[pick(f.parameters.size())] ^= static_cast<uint8_t>(1 + pick(255));
        break;
      default:
        if (!f.sessions.empty()) f.sessions.erase(f.sessions.begin() + static_cast<long>(pick(f.sessions.size())));
        break;
    }
  }
  return testing::build_command(f);
}

// 8. The same at random, while the first client works: user nobody sends
// 3,000 frames built from the first client's handles, nonces and bytes as
// the bus carried them (every command that may change the TPM for
// everyone — NV, hierarchies, Startup and Shutdown — left out: nobody may
// legitimately run those), while the first client unseals and creates
// through tpm2-tools, under its own session and under the tools' own. Every
// tool succeeds, and the bus never carries the first client's secrets.
TEST_F(ServeAttackTest, ANeighboursRandomFramesFromAClientsBytesNeverReachItsSecrets) {
  ASSERT_EQ(::geteuid(), 0u) << "the test runs as root (as CI does): it also runs a client as nobody";
  const std::string secret = "random-neighbour-secret-4b8e", later = "random-neighbour-sensitive-90af";
  std::ofstream(path("secret")) << secret;
  std::ofstream(path("later")) << later;
  start_serve();
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}).exit_code, 0);
  ASSERT_EQ(
      tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("s.pub"), "-r", path("s.priv")})
          .exit_code,
      0);
  ASSERT_EQ(tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")})
                .exit_code,
            0);
  ASSERT_EQ(tool({"tpm2_startauthsession", "--hmac-session", "-S", path("session.ctx")}).exit_code, 0);
  const std::string auth = "session:" + path("session.ctx");
  auto first = tool({"tpm2_unseal", "-c", path("s.ctx"), "-p", auth});
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  const uint32_t victim = clients_last_session(commands(), responses());
  ASSERT_NE(victim, 0u);

  // The first client's bytes as the bus carried them, and every handle in them.
  std::vector<testing::CommandFrame> bases;
  std::vector<uint32_t> handles = {victim,     victim + 1, victim - 1, 0x80FF0000, 0x80FF0001,
                                   0x80000000, 0x80000001, 0x03000000, 0x02000000};
  for (const Bytes& b : commands()) {
    auto f = testing::parse_command(b);
    if (!f.ok()) continue;
    const CommandInfo* info = find_command(f->code);
    if (!info || info->writes_nv || info->extensive || f->code == 0x144 || f->code == 0x145) continue;
    for (uint32_t h : f->handles) handles.push_back(h);
    for (const auto& e : f->sessions) handles.push_back(e.handle);
    bases.push_back(*f);
  }
  for (const Bytes& b : frames_naming(victim, {})) bases.push_back(*testing::parse_command(b));
  std::mt19937 rng(38);
  std::vector<Bytes> frames;
  for (int i = 0; i < 3000; ++i) {
    frames.push_back(mutated(bases[std::uniform_int_distribution<size_t>(0, bases.size() - 1)(rng)], handles, rng));
  }

  Neighbour nobody(socket_path(), frames);
  ASSERT_TRUE(nobody.start());
  std::vector<CommandResult> runs;
  for (int round = 0; round < 3; ++round) {
    runs.push_back(tool({"tpm2_unseal", "-c", path("s.ctx"), "-p", auth}));
    runs.push_back(tool({"tpm2_unseal", "-c", path("s.ctx")}));
    runs.push_back(tool({"tpm2_create", "-C", path("prim.ctx"), "-P", auth, "-i", path("later"), "-u", path("l.pub"),
                         "-r", path("l.priv")}));
  }
  std::vector<uint32_t> got = nobody.finish();
  EXPECT_EQ(got.size(), frames.size()) << "user nobody's frames were not all answered";
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].exit_code, 0) << describe(runs[i]);
    if (i % 3 != 2) EXPECT_EQ(runs[i].out, secret);
  }
  EXPECT_FALSE(contains(bus(), as_bytes(secret))) << "the unsealed secret crossed the bus in clear";
  EXPECT_FALSE(contains(bus(), as_bytes(later))) << "the new object's sensitive data crossed the bus in clear";
  EXPECT_EQ(tool({"tpm2_flushcontext", path("session.ctx")}).exit_code, 0);
}

// Issue 38, item 4: a secret that crosses the bus in clear because the
// client's own session cannot be re-signed (tpm2-tools' -P PASSWORD with its
// own HMAC session keyed by the password) is told to the administrator: one
// <4> line per client and command code, naming the command, the uid, the
// pid and the program, and the fix; not one per command.
TEST_F(ServeAttackTest, AClearSecretIsToldOncePerClientAndCommand) {
  const std::string index = "0x1500036", password = "nv-password-81c4";
  // Twice NV's buffer (1024 on swtpm): tpm2_nvread reads it in two NV_Reads.
  const std::string data(2048, 'q');
  std::ofstream(path("nv")) << data;
  start_serve(/*journal=*/true);
  auto def = tool({"tpm2_nvdefine", index, "-C", "o", "-s", std::to_string(data.size()), "-a",
                   "authread|authwrite|no_da", "-p", password});
  ASSERT_EQ(def.exit_code, 0) << describe(def);
  auto write = tool({"tpm2_nvwrite", index, "-P", password, "-i", path("nv")});
  ASSERT_EQ(write.exit_code, 0) << describe(write);
  size_t reads_before = 0;
  for (uint32_t c : codes()) reads_before += c == kCcNvRead;
  int out = -1;
  const pid_t reader = testing::spawn(
      {"tpm2_nvread", index, "-P", password, "-s", std::to_string(data.size()), "-o", path("read")}, tools_env(), &out);
  ASSERT_GT(reader, 0);
  char buf[256];
  while (::read(out, buf, sizeof(buf)) > 0) {
  }
  ::close(out);
  int status = 0;
  ASSERT_EQ(::waitpid(reader, &status, 0), reader);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(slurp(path("read")), data);
  size_t reads = 0;
  for (uint32_t c : codes()) reads += c == kCcNvRead;
  EXPECT_GE(reads - reads_before, 2u) << "tpm2_nvread sent one NV_Read: nothing repeated";
  EXPECT_EQ(tool({"tpm2_nvundefine", index, "-C", "o"}).exit_code, 0);
  EXPECT_EQ(stop_serve(), 0);
  expect_no_handles_left();

  std::istringstream log(slurp(path("serve.log")));
  std::vector<std::string> read_lines, write_lines;
  for (std::string line; std::getline(log, line);) {
    if (line.rfind("<4>tpmsec serve: ", 0) != 0) continue;
    if (line.find("NV_Read (0x14e)") != std::string::npos) read_lines.push_back(line);
    if (line.find("NV_Write (0x137)") != std::string::npos) write_lines.push_back(line);
  }
  ASSERT_EQ(read_lines.size(), 1u) << slurp(path("serve.log"));
  const std::string& line = read_lines[0];
  EXPECT_NE(line.find("uid 0 pid " + std::to_string(reader) + " (tpm2_nvread)"), std::string::npos) << line;
  EXPECT_NE(line.find("put a secret on the bus in clear: its response's first parameter"), std::string::npos) << line;
  EXPECT_NE(line.find("--strict"), std::string::npos) << line;
  EXPECT_NE(line.find("salted session"), std::string::npos) << line;
  EXPECT_EQ(write_lines.size(), 1u) << slurp(path("serve.log"));
  if (!write_lines.empty()) EXPECT_NE(write_lines[0].find("(tpm2_nvwrite)"), std::string::npos) << write_lines[0];
}

}  // namespace
}  // namespace tpmsec
