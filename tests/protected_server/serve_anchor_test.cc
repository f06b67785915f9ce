// `tpmsec serve` with no anchor configured, on a TPM behind a bus (a real
// swtpm, which publishes no null_name: a Debian 12 machine's kernel 6.1
// publishes none either): it starts, pins a salt key at its first start (one
// it makes, or the key already at 0x81000001, as systemd-tpm2-setup leaves
// its SRK), keeps that pin across restarts, refuses to start (exit 3) when
// an attacker put another key at that handle, and forgets only what it made
// (--forget-state). With an EK certificate chaining to a root of the roots
// bundle the EK is the anchor; to an unknown root it is not. A TPM reset
// under a running serve costs at most the command in flight, and what the
// reset destroyed is no client's any more. Each start is judged by its one
// start-up line.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/ek_provisioning.h"
#include "support/interposer.h"
#include "support/run_command.h"
#include "support/serve_process.h"
#include "support/swtpm_process.h"
#include "support/test_data.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/null_key.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::describe;
using testing::run_command;
using testing::run_tpmsec;

constexpr int kExitIntegrity = 3;

// `tpmsec serve --tpm SPEC --dbus none ARGS...` in DIR (support/serve_process.h).
class Serve : public testing::ServeProcess {
 public:
  Serve(std::string dir, std::string tpm) : ServeProcess(dir), dir_(std::move(dir)), tpm_(std::move(tpm)) {}
  // True once it wrote its start-up line (it follows the listen); false
  // when it exited first (exit_code() says how).
  bool start(const std::vector<std::string>& args = {}) {
    std::vector<std::string> all{"--allow-root", "--tpm", tpm_, "--dbus", "none"};
    all.insert(all.end(), args.begin(), args.end());
    return ServeProcess::start(all) && wait_serving();
  }
  // The start-up line: "tpmsec serve: serving TPM ...; anchor: ...; session: ...; policy ...".
  std::string startup_line() const {
    std::smatch m;
    const std::string text = log();
    static const std::regex re("tpmsec serve: serving TPM [^\n]*");
    return std::regex_search(text, m, re) ? m.str() : "";
  }
  // A client of its own on the socket, connected while it lives (the tpmsec TCTI's transport).
  std::unique_ptr<Transport> client() const {
    std::string spec = "serve:path=" + socket();
    if (::getuid() != 0) spec += ",uid=" + std::to_string(::getuid());
    auto t = open_transport(spec);
    EXPECT_TRUE(t.ok()) << t.error().message();
    return t.ok() ? std::move(*t) : nullptr;
  }
  // tpm2-tools through this server (the tpmsec TCTI, serve:path=).
  CommandResult tool(std::vector<std::string> argv) const {
    std::string tpm = "serve:path=" + socket();
    if (::getuid() != 0) tpm += ",uid=" + std::to_string(::getuid());
    return run_command(argv, {"TPM2TOOLS_TCTI=" + std::string(TPMSEC_TCTI_PATH) + ":" + tpm,
                              "TPMSEC_STATE_DIR=" + dir_ + "/client-state"});
  }

 private:
  std::string dir_, tpm_;
};

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// The name `tpmsec serve` prints for the pinned key: "name 000b...".
std::string pinned_name(const std::string& line) {
  std::smatch m;
  static const std::regex re("persistent salt key 0x81000001 \\([^)]*name ([0-9a-f]{68})\\)");
  return std::regex_search(line, m, re) ? m[1].str() : "";
}

class ServeAnchorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("tpmsec-serve-anchor");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    swtpm_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void start_swtpm(const std::string& state_dir = "") {
    swtpm_ = std::make_unique<testing::SwtpmProcess>();
    if (!state_dir.empty()) swtpm_->use_state_dir(state_dir);
    ASSERT_TRUE(swtpm_->start()) << swtpm_->error();
  }
  // tpm2-tools straight to the swtpm (serve stopped: swtpm serves one client).
  CommandResult direct(std::vector<std::string> argv) {
    return run_command(argv, {"TPM2TOOLS_TCTI=" + swtpm_->tcti()});
  }
  bool persistent_exists(uint32_t handle) {
    CommandResult r = direct({"tpm2_getcap", "handles-persistent"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%X", handle);
    return r.out.find(hex) != std::string::npos;
  }
  // A key at 0x81000001 made with tpm2-tools, as systemd-tpm2-setup makes its
  // SRK (an ECC P-256 restricted decryption key, AES-128 CFB), `attributes`
  // choosing which of such keys.
  void put_key_at_0x81000001(const std::string& attributes) {
    const std::string ctx = dir_ + "/srk.ctx";
    CommandResult made =
        direct({"tpm2_createprimary", "-C", "o", "-G", "ecc256:aes128cfb", "-a", attributes, "-c", ctx});
    ASSERT_EQ(made.exit_code, 0) << describe(made);
    CommandResult put = direct({"tpm2_evictcontrol", "-C", "o", "-c", ctx, "0x81000001"});
    ASSERT_EQ(put.exit_code, 0) << describe(put);
    (void)direct({"tpm2_flushcontext", "-t"});
  }
  CommandResult forget_state() {
    return run_tpmsec({"serve", "--forget-state", "--tpm", swtpm_->spec()}, {"TPMSEC_STATE_DIR=" + dir_ + "/state"});
  }

  std::string dir_;
  std::unique_ptr<testing::SwtpmProcess> swtpm_;
};

const char kSrkAttributes[] = "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda";

// First start: nothing at 0x81000001, so serve makes its key there and says
// it trusts it on this first start; clients are served through it. The next
// start keeps the same pin and says where it is kept; --forget-state evicts
// the key serve made.
TEST_F(ServeAnchorTest, NoAnchorPinsASaltKeyAtFirstStartAndKeepsIt) {
  start_swtpm();
  Serve serve(dir_, swtpm_->spec());
  ASSERT_TRUE(serve.start()) << serve.log();
  const std::string first = serve.startup_line();
  EXPECT_NE(first.find("TPM " + swtpm_->spec() + "; anchor: persistent salt key 0x81000001 (ECC P-256, made by tpmsec"),
            std::string::npos)
      << serve.log();
  EXPECT_NE(first.find("trust on first start"), std::string::npos) << first;
  EXPECT_NE(first.find("; session: salted to the persistent key 0x81000001 (ECC P-256), HMAC-SHA256 with audit, "
                       "AES-128-CFB parameter encryption; policy "),
            std::string::npos)
      << first;
  EXPECT_NE(first.find(" rule '"), std::string::npos) << first;
  EXPECT_NE(serve.log().find("warning: trust on first start: pinned the salt key"), std::string::npos);
  CommandResult rnd = serve.tool({"tpm2_getrandom", "--hex", "8"});
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd) << serve.log();
  const std::string name = pinned_name(first);
  ASSERT_FALSE(name.empty()) << first;
  serve.stop();

  ASSERT_TRUE(serve.start()) << serve.log();
  const std::string second = serve.startup_line();
  EXPECT_EQ(pinned_name(second), name) << second;
  EXPECT_EQ(second.find("trust on first start"), std::string::npos) << second;
  EXPECT_NE(second.find("pinned in " + serve.state()), std::string::npos) << second;
  rnd = serve.tool({"tpm2_getrandom", "--hex", "8"});
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd) << serve.log();
  serve.stop();

  ASSERT_TRUE(persistent_exists(0x81000001));
  CommandResult forgot = forget_state();
  EXPECT_EQ(forgot.exit_code, 0) << describe(forgot);
  EXPECT_NE(forgot.out.find("evicted the salt key tpmsec made at 0x81000001"), std::string::npos) << forgot.out;
  EXPECT_FALSE(persistent_exists(0x81000001));
}

// systemd's SRK already at 0x81000001: serve adopts it (makes nothing) and
// --forget-state forgets the pin but leaves the key in the TPM.
TEST_F(ServeAnchorTest, TheKeyAlreadyAt0x81000001IsAdoptedAndNeverEvicted) {
  start_swtpm();
  put_key_at_0x81000001(kSrkAttributes);
  Serve serve(dir_, swtpm_->spec());
  ASSERT_TRUE(serve.start()) << serve.log();
  EXPECT_NE(serve.startup_line().find("anchor: persistent salt key 0x81000001 (ECC P-256, adopted"), std::string::npos)
      << serve.log();
  CommandResult rnd = serve.tool({"tpm2_getrandom", "--hex", "8"});
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd) << serve.log();
  serve.stop();
  CommandResult forgot = forget_state();
  EXPECT_EQ(forgot.exit_code, 0) << describe(forgot);
  EXPECT_NE(forgot.out.find("forgot the salt key adopted at 0x81000001; it stays in the TPM"), std::string::npos)
      << forgot.out;
  EXPECT_TRUE(persistent_exists(0x81000001));
}

// An attacker evicts the pinned key and puts one of their own at the handle
// (a restricted decryption key too, so only the pin tells them apart): serve
// refuses to start, exit 3, naming both keys and how to forget the pin.
TEST_F(ServeAnchorTest, AnotherKeyAtThePinnedHandleIsRefused) {
  start_swtpm();
  Serve serve(dir_, swtpm_->spec());
  ASSERT_TRUE(serve.start()) << serve.log();
  const std::string name = pinned_name(serve.startup_line());
  ASSERT_FALSE(name.empty()) << serve.log();
  serve.stop();
  CommandResult gone = direct({"tpm2_evictcontrol", "-C", "o", "-c", "0x81000001"});
  ASSERT_EQ(gone.exit_code, 0) << describe(gone);
  put_key_at_0x81000001("restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth");

  EXPECT_FALSE(serve.start());
  EXPECT_EQ(serve.exit_code(), kExitIntegrity) << serve.log();
  EXPECT_NE(serve.log().find("not the pinned salt key " + name + " (swapped)"), std::string::npos) << serve.log();
  EXPECT_NE(serve.log().find("tpmsec serve --forget-state"), std::string::npos) << serve.log();
  EXPECT_TRUE(serve.startup_line().empty());

  // Evicted and not replaced: refused too.
  ASSERT_EQ(direct({"tpm2_evictcontrol", "-C", "o", "-c", "0x81000001"}).exit_code, 0);
  EXPECT_FALSE(serve.start());
  EXPECT_EQ(serve.exit_code(), kExitIntegrity) << serve.log();
  EXPECT_NE(serve.log().find("is no longer at 0x81000001"), std::string::npos) << serve.log();
}

// A TPM reset under a running serve (swtpm's _TPM_Init through its control
// channel, then Startup(CLEAR), which swtpm sends itself: the bus sees no
// TPM_RC_INITIALIZE): the server's session is gone; at most the command in
// flight fails, and the next ones work. The pinned salt key, which outlives
// the reset, is checked again after each; once serve stopped, the TPM holds
// nothing of it (no session it started after a reset left behind).
TEST_F(ServeAnchorTest, ATpmResetUnderServeCostsAtMostTheCommandInFlight) {
  start_swtpm();
  Serve serve(dir_, swtpm_->spec());
  ASSERT_TRUE(serve.start()) << serve.log();
  ASSERT_EQ(serve.tool({"tpm2_getrandom", "--hex", "8"}).exit_code, 0) << serve.log();
  for (int reset = 0; reset < 2; ++reset) {
    SCOPED_TRACE("reset " + std::to_string(reset + 1));
    CommandResult init =
        run_command({"swtpm_ioctl", "--tcp", "127.0.0.1:" + std::to_string(swtpm_->ctrl_port()), "-i"});
    ASSERT_EQ(init.exit_code, 0) << describe(init);
    (void)serve.tool({"tpm2_getrandom", "--hex", "8"});  // may fail: in flight at the reset
    for (int i = 0; i < 3; ++i) {
      CommandResult r = serve.tool({"tpm2_pcrread", "sha256:16"});
      EXPECT_EQ(r.exit_code, 0) << describe(r) << serve.log();
    }
  }
  EXPECT_NE(serve.startup_line().find("anchor: persistent salt key"), std::string::npos);
  // Each reset: the pinned key checked again before the next command.
  EXPECT_GE(count_of(serve.log(), "re-established: anchor: persistent salt key 0x81000001"), 2u) << serve.log();
  // Only what the server made in the TPM's present epoch was flushed, and
  // all of it: a session of its started after a reset is not left behind.
  serve.stop();
  for (const char* kind : {"handles-transient", "handles-loaded-session", "handles-saved-session"}) {
    CommandResult left = direct({"tpm2_getcap", kind});
    ASSERT_EQ(left.exit_code, 0) << describe(left);
    EXPECT_EQ(left.out, "") << kind << " left in the TPM\n" << serve.log();
  }
}

// A reset serve's bus does not see: an interposer answers the TPM's
// TPM_RC_INITIALIZE with a Startup(CLEAR) of its own and the command again,
// as firmware or a kernel that started the TPM would leave it. serve learns
// of it from its session's loss, starts another at once (the command in
// flight is answered), and re-resolves its anchor before the next command,
// flushing that new session, of the TPM's present epoch, before its
// resource manager forgets what the reset took: afterwards the TPM holds
// one session, serve's current one (told first, the manager refused that
// flush and the session stayed, nobody's, until serve's shutdown sweep).
TEST_F(ServeAnchorTest, AResetTheBusDoesNotSeeLeavesNoSessionOfServesBehind) {
  start_swtpm();
  testing::Interposer proxy(swtpm_->port());
  ASSERT_TRUE(proxy.start().ok());
  const Bytes startup_clear = {0x80, 0x01, 0, 0, 0, 0x0c, 0, 0, 0x01, 0x44, 0, 0};
  // GetCapability(TPM_CAP_HANDLES, loaded sessions, 64).
  const Bytes list_sessions = {0x80, 0x01, 0, 0, 0, 0x16, 0, 0, 0x01, 0x7a, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 64};
  std::atomic<bool> probe{false};
  std::atomic<int> loaded{-1};
  proxy.set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    if (probe.exchange(false)) {
      Result<Bytes> listed = tpm.transmit(list_sessions);
      if (listed.ok() && listed->size() >= 19 && load_be32(listed->data() + 6) == 0) {
        loaded = static_cast<int>(load_be32(listed->data() + 15));
      }
    }
    Result<Bytes> r = tpm.transmit(c.bytes);
    if (r.ok() && c.code != cc::kStartup && r->size() >= 10 && load_be32(r->data() + 6) == rc::kInitialize &&
        tpm.transmit(startup_clear).ok()) {
      r = tpm.transmit(c.bytes);
    }
    return r.ok() ? testing::Reply::answer(std::move(*r)) : testing::Reply::close();
  });
  Serve serve(dir_, proxy.spec());
  ASSERT_TRUE(serve.start()) << serve.log();
  ASSERT_EQ(serve.tool({"tpm2_getrandom", "--hex", "8"}).exit_code, 0) << serve.log();
  CommandResult init = run_command({"swtpm_ioctl", "--tcp", "127.0.0.1:" + std::to_string(swtpm_->ctrl_port()), "-i"});
  ASSERT_EQ(init.exit_code, 0) << describe(init);
  for (int i = 0; i < 3; ++i) {
    probe = i == 2;  // once the anchor was resolved again
    CommandResult r = serve.tool({"tpm2_pcrread", "sha256:16"});
    EXPECT_EQ(r.exit_code, 0) << describe(r) << serve.log();
  }
  const std::string log = serve.log();
  EXPECT_EQ(log.find("the TPM was reset and not started"), std::string::npos) << "the bus saw the reset\n" << log;
  EXPECT_NE(log.find("the TPM was reset under the server (resetCount"), std::string::npos) << log;
  EXPECT_NE(log.find("re-established: anchor: persistent salt key 0x81000001"), std::string::npos) << log;
  EXPECT_EQ(loaded.load(), 1) << "sessions loaded in the TPM besides serve's own\n" << log;
}

// An attacker with the owner's authorization (empty, as on most machines)
// swaps the pinned salt key at 0x81000001 for a key of theirs through serve
// itself, while serve's session, started on the pinned key, runs on; then the
// TPM is reset. serve resolves its anchor again before the next client
// command: the key at the handle is not the pinned one, so that command and
// every later one are refused (TSS2_RESMGR_RC_GENERAL_FAILURE), with the log
// naming the pinned key; the attacker's key is never adopted (no second
// first start).
TEST_F(ServeAnchorTest, AKeySwappedInBeforeAResetIsRefusedNotAdopted) {
  start_swtpm();
  Serve serve(dir_, swtpm_->spec());
  ASSERT_TRUE(serve.start()) << serve.log();
  const std::string name = pinned_name(serve.startup_line());
  ASSERT_FALSE(name.empty()) << serve.log();
  ASSERT_EQ(serve.tool({"tpm2_getrandom", "--hex", "8"}).exit_code, 0) << serve.log();
  CommandResult gone = serve.tool({"tpm2_evictcontrol", "-C", "o", "-c", "0x81000001"});
  ASSERT_EQ(gone.exit_code, 0) << describe(gone) << serve.log();
  const std::string ctx = dir_ + "/attacker.ctx";
  CommandResult made =
      serve.tool({"tpm2_createprimary", "-C", "o", "-G", "ecc256:aes128cfb", "-a",
                  "restricted|decrypt|fixedtpm|fixedparent|sensitivedataorigin|userwithauth", "-c", ctx});
  ASSERT_EQ(made.exit_code, 0) << describe(made) << serve.log();
  CommandResult put = serve.tool({"tpm2_evictcontrol", "-C", "o", "-c", ctx, "0x81000001"});
  ASSERT_EQ(put.exit_code, 0) << describe(put) << serve.log();
  ASSERT_EQ(serve.tool({"tpm2_getrandom", "--hex", "8"}).exit_code, 0) << serve.log();  // the running session

  CommandResult init = run_command({"swtpm_ioctl", "--tcp", "127.0.0.1:" + std::to_string(swtpm_->ctrl_port()), "-i"});
  ASSERT_EQ(init.exit_code, 0) << describe(init);
  for (int i = 0; i < 2; ++i) {
    CommandResult r = serve.tool({"tpm2_pcrread", "sha256:16"});
    EXPECT_NE(r.exit_code, 0) << describe(r) << serve.log();
  }
  const std::string log = serve.log();
  EXPECT_NE(log.find("not re-established, tried again at the next command"), std::string::npos) << log;
  EXPECT_NE(log.find("not the pinned salt key " + name + " (swapped)"), std::string::npos) << log;
  EXPECT_EQ(count_of(log, "trust on first start: pinned the salt key"), 1u) << log;
}

// A null-hierarchy primary (ECC P-256, the null key's template) in `tpm`'s
// space: its handle, or the response code that refused it.
Result<uint32_t> null_primary(Transport& tpm) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  TPMSEC_ASSIGN_OR_RETURN(auto made, Tpm(tpm).run(c, {Auth::password()}));
  return made.object_handle;
}

// The reset destroyed what client A held, and serve forgets it without a
// flush: client B's new primary, which the TPM puts where A's first object
// was, is B's (not refused as A's, 0xb0001); A's old handles (B's first
// virtual handle is the same number) are refused as handles it never held,
// never answered with B's object; nothing is left once both left.
TEST_F(ServeAnchorTest, ATpmResetUnderServeForgetsEveryClientsObjectsAndSessions) {
  start_swtpm();
  Serve serve(dir_, swtpm_->spec());
  ASSERT_TRUE(serve.start()) << serve.log();
  std::unique_ptr<Transport> a = serve.client();
  ASSERT_TRUE(a);
  Result<uint32_t> a_first = null_primary(*a);
  ASSERT_TRUE(a_first.ok()) << a_first.error().message() << serve.log();
  ASSERT_TRUE(null_primary(*a).ok()) << serve.log();
  cmd::StartAuthSession start;
  start.nonce_caller.bytes = Bytes(32, 0x5A);
  auto a_session = Tpm(*a).run(start);
  ASSERT_TRUE(a_session.ok()) << a_session.error().message() << serve.log();

  CommandResult init = run_command({"swtpm_ioctl", "--tcp", "127.0.0.1:" + std::to_string(swtpm_->ctrl_port()), "-i"});
  ASSERT_EQ(init.exit_code, 0) << describe(init);
  (void)Tpm(*a).run(cmd::ReadPublic{NamedHandle::of(*a_first)});                     // in flight at the reset: may fail
  ASSERT_EQ(serve.tool({"tpm2_pcrread", "sha256:16"}).exit_code, 0) << serve.log();  // serve's session again

  std::unique_ptr<Transport> b = serve.client();
  ASSERT_TRUE(b);
  Result<uint32_t> b_first = null_primary(*b);
  ASSERT_TRUE(b_first.ok()) << b_first.error().message() << serve.log();
  // A and B are one process here, so one handle space (the socket front's
  // spaces follow the peer process): B's object has the next virtual handle.
  // What counts is that it is created at all and that A's old handle is refused.
  EXPECT_NE(*b_first, *a_first);
  auto b_reads = Tpm(*b).run(cmd::ReadPublic{NamedHandle::of(*b_first)});
  EXPECT_TRUE(b_reads.ok()) << b_reads.error().message() << serve.log();
  EXPECT_EQ(serve.log().find("as a new one: dropped, refused"), std::string::npos) << serve.log();

  auto a_reads = Tpm(*a).run(cmd::ReadPublic{NamedHandle::of(*a_first)});
  EXPECT_EQ(a_reads.ok() ? 0u : a_reads.error().tpm_rc(), rc_handle_at(0)) << "A reached an object it no longer holds";
  auto a_saves = Tpm(*a).run(cmd::ContextSave{NamedHandle::of(a_session->session_handle)});
  EXPECT_EQ(a_saves.ok() ? 0u : a_saves.error().tpm_rc(), rc_handle_at(0)) << "A reached a session it no longer holds";
  EXPECT_TRUE(null_primary(*a).ok()) << "A's space works on after the reset" << serve.log();

  a.reset();
  b.reset();
  serve.stop();
  for (const char* kind : {"handles-transient", "handles-loaded-session", "handles-saved-session"}) {
    CommandResult left = direct({"tpm2_getcap", kind});
    ASSERT_EQ(left.exit_code, 0) << describe(left);
    EXPECT_EQ(left.out, "") << kind << " left in the TPM";
  }
}

// The EK certificate chaining to a root of the bundle (the shipped bundle's
// layout: PEM files beside a manifest) is the anchor, named with the root it
// rests on, and is verified again after a TPM reset under serve; the shipped
// roots, to which the swtpm's local CA is unknown, are not: serve says why
// and stands on the salt key it pins.
TEST_F(ServeAnchorTest, TheEkIsTheAnchorOnlyWhenItChainsToABundledRoot) {
  if (!testing::have_swtpm_setup()) GTEST_FAIL() << "swtpm_setup is needed (scripts/quickstart installs it)";
  const std::string work = dir_ + "/manufacturer";
  fs::create_directories(work);
  auto tpm = testing::provision_tpm(work);
  ASSERT_TRUE(tpm.ok()) << tpm.error().message();
  start_swtpm(tpm->state_dir);
  const std::string roots = dir_ + "/roots";
  fs::create_directories(roots);
  fs::copy_file(tpm->root_cert, roots + "/Local-root.pem");
  fs::copy_file(tpm->issuer_cert, roots + "/Local-intermediate.pem");
  std::ofstream(roots + "/SOURCES.tsv") << "vendor\tfile\nLocal\tLocal-root.pem\n";

  Serve serve(dir_, swtpm_->spec());
  ASSERT_TRUE(serve.start({"--ek-roots", roots})) << serve.log();
  const std::string line = serve.startup_line();
  EXPECT_NE(line.find("anchor: RSA-2048 EK certificate chaining to "), std::string::npos) << serve.log();
  EXPECT_NE(line.find(" of " + roots + "; session: salted to the endorsement key (RSA-2048)"), std::string::npos)
      << line;
  CommandResult rnd = serve.tool({"tpm2_getrandom", "--hex", "8"});
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd) << serve.log();
  // A TPM reset under it: the EK, which outlives the reset, is verified
  // against the bundle and its pin again before the next command.
  CommandResult init = run_command({"swtpm_ioctl", "--tcp", "127.0.0.1:" + std::to_string(swtpm_->ctrl_port()), "-i"});
  ASSERT_EQ(init.exit_code, 0) << describe(init);
  (void)serve.tool({"tpm2_getrandom", "--hex", "8"});  // may fail: in flight at the reset
  rnd = serve.tool({"tpm2_getrandom", "--hex", "8"});
  EXPECT_EQ(rnd.exit_code, 0) << describe(rnd) << serve.log();
  EXPECT_GE(count_of(serve.log(), "re-established: anchor: RSA-2048 EK certificate chaining to "), 1u) << serve.log();
  serve.stop();

  // The shipped roots: the swtpm's local CA is none of them.
  Serve shipped(dir_ + "/other", swtpm_->spec());
  fs::create_directories(dir_ + "/other");
  ASSERT_TRUE(shipped.start({"--ek-roots", std::string(TPMSEC_DATA_DIR) + "/ek-roots"})) << shipped.log();
  EXPECT_NE(shipped.log().find("no EK anchor ("), std::string::npos) << shipped.log();
  EXPECT_NE(shipped.log().find("does not verify against the CA bundle"), std::string::npos) << shipped.log();
  EXPECT_NE(shipped.startup_line().find("anchor: persistent salt key 0x81000001"), std::string::npos) << shipped.log();
}

}  // namespace
}  // namespace tpmsec
