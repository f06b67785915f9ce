// The salt key's trust anchors as a user meets them on a TPM behind a bus
// (a real swtpm): which one is needed, how a pin is kept, checked and
// forgotten, and that a pin is never silently ignored. The attacks on each
// anchor are in interposer_test.cc and ek_salt_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "testing/memory_host_state.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/protect.h"

namespace tpmsec {
namespace {

using testing::CommandResult;
using testing::describe;
using testing::kExitIntegrity;
using testing::kExitUsage;
using testing::run_tpmsec;

const std::string kDigest(64, 'b');

std::string temp_dir(const char* prefix) {
  std::string tmpl = ::testing::TempDir() + "/" + prefix + "-XXXXXX";
  return ::mkdtemp(tmpl.data()) ? tmpl : "";
}

class TrustAnchorTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    swtpm_ = new testing::SwtpmProcess();
    (void)swtpm_->start();
  }
  static void TearDownTestSuite() {
    delete swtpm_;
    swtpm_ = nullptr;
  }

 protected:
  void SetUp() override {
    if (!swtpm_->running()) GTEST_SKIP() << swtpm_->error();
    state_ = temp_dir("anchor-state");
    ASSERT_FALSE(state_.empty());
  }
  void TearDown() override {
    if (!state_.empty()) std::filesystem::remove_all(state_);
  }
  CommandResult tpmsec(std::vector<std::string> args, const std::string& boot = "boot-1") {
    args.insert(args.end(), {"--tpm", swtpm_->spec()});
    return run_tpmsec(args, {"TPMSEC_STATE_DIR=" + state_, "TPMSEC_BOOT_ID=" + boot});
  }
  std::string genuine_name() {
    auto r = tpmsec({"null-key"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return r.out.substr(0, r.out.find('\n'));
  }
  static std::string wrong_name() { return "000b" + std::string(64, '0'); }
  // The protect path in this process, its host state in host_ (memory).
  Result<std::unique_ptr<ProtectedTpm>> open_in_memory(Anchor anchor, std::vector<std::string>* notices) {
    ProtectRequest r;
    r.tpm = swtpm_->spec();
    r.anchor = std::move(anchor);
    r.keep = true;
    r.host = host_;
    r.notice = [notices](std::string_view line) { notices->emplace_back(line); };
    return ProtectedTpm::open(r);
  }
  // Without --tpm, the TPM named by TPM2TOOLS_TCTI=tpmsec:SPEC,ITEMS.
  CommandResult via_tcti(const std::vector<std::string>& args, const std::string& items) {
    return run_tpmsec(args, {"TPMSEC_STATE_DIR=" + state_, "TPMSEC_BOOT_ID=boot-1",
                             "TPMSEC_TPM=", "TPM2TOOLS_TCTI=tpmsec:" + swtpm_->spec() + items});
  }

  static testing::SwtpmProcess* swtpm_;
  std::string state_;
  std::shared_ptr<testing::MemoryHostState> host_ = std::make_shared<testing::MemoryHostState>("boot-1");
};

// For a test of the protect path over host state in memory: the state
// directory the environment names must not come to exist.
class NoStateDirectory {
 public:
  explicit NoStateDirectory(const std::string& parent) : dir_(parent + "/unused") {
    ::setenv("TPMSEC_STATE_DIR", dir_.c_str(), 1);
  }
  ~NoStateDirectory() {
    EXPECT_FALSE(std::filesystem::exists(dir_)) << "the library wrote a state directory";
    ::unsetenv("TPMSEC_STATE_DIR");
  }

 private:
  std::string dir_;
};

testing::SwtpmProcess* TrustAnchorTest::swtpm_ = nullptr;

// Behind a bus and with no anchor, every protected command refuses before
// any session is salted, and names the three ways to give one.
TEST_F(TrustAnchorTest, ProtectedCommandsWithoutAnAnchorAreRefused) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"pcr", "extend", "16", kDigest},
        std::vector<std::string>{"pcr", "extend", "16", kDigest, "--strategy", "per-command"},
        std::vector<std::string>{"pcr", "read", "16", "--protect", "audit"}, std::vector<std::string>{"random", "8"}}) {
    SCOPED_TRACE(args[0] + " " + args.back());
    auto r = tpmsec(args);
    EXPECT_EQ(r.exit_code, kExitUsage) << describe(r);
    for (const char* option : {"--ek-ca", "--null-name", "--tofu"}) EXPECT_NE(r.err.find(option), std::string::npos);
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(TrustAnchorTest, AGivenPinIsUsed) {
  std::string name = genuine_name();
  auto ok = tpmsec({"pcr", "extend", "16", kDigest, "--null-name", name});
  EXPECT_EQ(ok.exit_code, 0) << describe(ok);
  auto bad = tpmsec({"pcr", "extend", "16", kDigest, "--null-name", wrong_name()});
  EXPECT_EQ(bad.exit_code, kExitIntegrity) << describe(bad);
  EXPECT_NE(bad.err.find("--null-name"), std::string::npos) << bad.err;
}

// An empty or unreadable pin is a usage error, never "no pin".
TEST_F(TrustAnchorTest, AnUnusablePinIsAUsageError) {
  for (std::string pin :
       {std::string(), std::string("/etc/passwd"), std::string("/nonexistent/null_name"), std::string("000b00")}) {
    SCOPED_TRACE("'" + pin + "'");
    auto r = tpmsec({"pcr", "extend", "16", kDigest, "--null-name", pin});
    EXPECT_EQ(r.exit_code, kExitUsage) << describe(r);
  }
  auto both = tpmsec({"pcr", "extend", "16", kDigest, "--null-name", wrong_name(), "--tofu"});
  EXPECT_EQ(both.exit_code, kExitUsage) << describe(both);
}

// A command that opens no session checks a pin it is given instead of
// ignoring it: one CreatePrimary of the null key.
TEST_F(TrustAnchorTest, APinOnACommandWithoutASessionIsChecked) {
  std::string name = genuine_name();
  for (std::vector<std::string> args :
       {std::vector<std::string>{"pcr", "read", "16"},
        std::vector<std::string>{"pcr", "extend", "16", kDigest, "--strategy", "plain"},
        std::vector<std::string>{"random", "8", "--protect", "none"}, std::vector<std::string>{"null-key"}}) {
    SCOPED_TRACE(args[0] + " " + args.back());
    auto wrong = args;
    wrong.insert(wrong.end(), {"--null-name", wrong_name()});
    auto r = tpmsec(wrong);
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_EQ(r.out, "");
    auto right = args;
    right.insert(right.end(), {"--null-name", name});
    auto g = tpmsec(right);
    EXPECT_EQ(g.exit_code, 0) << describe(g);
  }
}

// --tofu: the first use of a boot pins (with a warning), later uses of the
// boot are checked against the pin, a new boot pins afresh, and --forget
// drops the pin of a TPM string.
TEST_F(TrustAnchorTest, TofuPinsPerBootAndForgets) {
  auto first = tpmsec({"pcr", "extend", "16", kDigest, "--tofu"});
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  EXPECT_NE(first.err.find("warning: tofu: trusting the null key"), std::string::npos) << first.err;
  std::string name = genuine_name();

  FileHostState store(state_);
  const TpmId id = TpmId::of(swtpm_->spec());
  auto pin = store.null_key_pin(id, SaltKind::kEcc);
  ASSERT_TRUE(pin.ok()) << pin.error().message();
  ASSERT_TRUE(pin->has_value());
  EXPECT_EQ(to_hex((*pin)->name), name);
  EXPECT_EQ((*pin)->boot_id, "boot-1");
  EXPECT_EQ(std::filesystem::status(store.where(StateRecord::kNullKeyPin)).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);

  auto again = tpmsec({"pcr", "read", "16", "--protect", "audit", "--tofu"});
  EXPECT_EQ(again.exit_code, 0) << describe(again);
  EXPECT_EQ(again.err, "") << "a kept pin is used silently";

  // The pin of this boot is another key's (as after a substitution, or a
  // TPM reset this host did not see): exit 3, saying how to forget it.
  ASSERT_TRUE(store.put_null_key_pin(id, SaltKind::kEcc, {*from_hex(wrong_name()), "boot-1"}).ok());
  auto mismatch = tpmsec({"pcr", "extend", "16", kDigest, "--tofu"});
  EXPECT_EQ(mismatch.exit_code, kExitIntegrity) << describe(mismatch);
  EXPECT_NE(mismatch.err.find("null-key --forget"), std::string::npos) << mismatch.err;

  // A pin of an earlier boot is stale: the next first use replaces it.
  auto next_boot = tpmsec({"pcr", "extend", "16", kDigest, "--tofu"}, "boot-2");
  EXPECT_EQ(next_boot.exit_code, 0) << describe(next_boot);
  EXPECT_NE(next_boot.err.find("first use"), std::string::npos) << next_boot.err;

  auto forget = tpmsec({"null-key", "--forget"});
  EXPECT_EQ(forget.exit_code, 0) << describe(forget);
  EXPECT_NE(forget.err.find("forgot"), std::string::npos) << forget.err;
  auto gone = store.null_key_pin(id, SaltKind::kEcc);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

// The protect path with its host state in memory (testing/memory_host_state.h):
// --tofu pins on the first use of a boot, uses the pin silently afterwards,
// pins afresh after a reboot, and what it keeps for the next process
// (capabilities, the null key) is of its boot. No state directory is made.
TEST_F(TrustAnchorTest, InMemoryHostStateTofuPinsPerBootAndKeepsItsSessionCache) {
  NoStateDirectory none(state_);
  const TpmId tpm = TpmId::of(swtpm_->spec());
  std::vector<std::string> notices;
  Bytes pinned;
  {
    auto first = open_in_memory(anchor::Tofu{}, &notices);
    ASSERT_TRUE(first.ok()) << first.error().message();
    auto factory = (*first)->factory();
    ASSERT_TRUE(factory.ok()) << factory.error().message();
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("trusting the null key"), std::string::npos) << notices[0];
    auto pin = host_->null_key_pin(tpm, SaltKind::kEcc);
    ASSERT_TRUE(pin.ok() && pin->has_value());
    EXPECT_EQ((*pin)->boot_id, "boot-1");
    EXPECT_EQ((*pin)->name, (*factory)->null_key()->name());
    pinned = (*pin)->name;
    (*first)->keep(factory->get());
    auto info = host_->kept_info(tpm, "boot-1");
    ASSERT_TRUE(info.ok() && info->has_value());
    auto kept = host_->kept_null_key(tpm, "boot-1", SaltKind::kEcc);
    ASSERT_TRUE(kept.ok() && kept->has_value());
    EXPECT_EQ((*kept)->name, pinned);
  }
  {
    // The same boot: the pin is used silently, and held to.
    notices.clear();
    auto again = open_in_memory(anchor::Tofu{}, &notices);
    ASSERT_TRUE(again.ok()) << again.error().message();
    ASSERT_TRUE((*again)->protection().pinned_null_name.has_value());
    EXPECT_EQ(*(*again)->protection().pinned_null_name, pinned);
    EXPECT_TRUE((*again)->protection().kept_null_key.has_value()) << "the kept null key is offered";
    auto factory = (*again)->factory();
    EXPECT_TRUE(factory.ok()) << factory.error().message();
    EXPECT_TRUE(notices.empty());
  }
  {
    // A pin of this boot that is another key's: an integrity failure.
    ASSERT_TRUE(host_->put_null_key_pin(tpm, SaltKind::kEcc, {Bytes(34, 0x0b), "boot-1"}).ok());
    auto forged = open_in_memory(anchor::Tofu{}, &notices);
    ASSERT_TRUE(forged.ok()) << forged.error().message();
    auto refused = (*forged)->factory();
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().kind(), ErrorKind::kIntegrity) << refused.error().message();
  }
  {
    // Another boot: the pin is stale and what was kept of boot-1 is not used.
    host_->set_boot_id("boot-2");
    notices.clear();
    auto rebooted = open_in_memory(anchor::Tofu{}, &notices);
    ASSERT_TRUE(rebooted.ok()) << rebooted.error().message();
    EXPECT_FALSE((*rebooted)->protection().pinned_null_name.has_value());
    EXPECT_TRUE((*rebooted)->protection().trust_first_use);
    EXPECT_FALSE((*rebooted)->protection().kept_null_key.has_value()) << "boot-1's null key used in boot-2";
    auto factory = (*rebooted)->factory();
    ASSERT_TRUE(factory.ok()) << factory.error().message();
    auto repinned = host_->null_key_pin(tpm, SaltKind::kEcc);
    ASSERT_TRUE(repinned.ok() && repinned->has_value());
    EXPECT_EQ((*repinned)->boot_id, "boot-2");
    EXPECT_EQ((*repinned)->name, pinned) << "the same TPM, not reset";
  }
}

// --null-name FILE is read through the host state.
TEST_F(TrustAnchorTest, InMemoryHostStateANamedPinFileIsReadThroughTheHost) {
  NoStateDirectory none(state_);
  std::vector<std::string> notices;
  std::string genuine;
  {
    auto tofu = open_in_memory(anchor::Tofu{}, &notices);
    ASSERT_TRUE(tofu.ok()) << tofu.error().message();
    auto factory = (*tofu)->factory();
    ASSERT_TRUE(factory.ok()) << factory.error().message();
    genuine = (*factory)->null_key()->name_hex();
  }
  {
    host_->add_file("/pins/null_name", genuine + "\n");
    auto named = open_in_memory(anchor::NullName{"/pins/null_name"}, &notices);
    ASSERT_TRUE(named.ok()) << named.error().message();
    auto factory = (*named)->factory();
    EXPECT_TRUE(factory.ok()) << factory.error().message();
  }
  {
    host_->add_file("/pins/other", "000b" + std::string(64, '0') + "\n");
    auto other = open_in_memory(anchor::NullName{"/pins/other"}, &notices);
    ASSERT_TRUE(other.ok()) << other.error().message();
    auto refused = (*other)->factory();
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().kind(), ErrorKind::kIntegrity) << refused.error().message();
  }
  auto missing = open_in_memory(anchor::NullName{"/pins/none"}, &notices);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(missing.error().message().find("cannot read null key name from /pins/none"), std::string::npos);
}

// PCRs 0-15 of a kernel device are what verifiers trust: extending one
// needs --force-pcr, refused before the device is even opened.
TEST(ForcePcr, ExtendingPcr0To15OfADeviceNeedsForcePcr) {
  for (const char* pcr : {"0", "7", "10", "15"}) {
    auto r = run_tpmsec({"pcr", "extend", pcr, kDigest, "--tpm", "device:/dev/null"});
    EXPECT_EQ(r.exit_code, kExitUsage) << describe(r);
    EXPECT_NE(r.err.find("--force-pcr"), std::string::npos) << r.err;
  }
  // With it, the command goes on to the device (which here is no TPM).
  auto forced = run_tpmsec({"pcr", "extend", "7", kDigest, "--tpm", "device:/dev/null", "--force-pcr"});
  EXPECT_EQ(forced.exit_code, 1) << describe(forced);
  EXPECT_EQ(forced.err.find("--force-pcr"), std::string::npos) << forced.err;
}

// TPM2TOOLS_TCTI=tpmsec:TPM,ITEMS (the TCTI's syntax, docs/tcti.md): the CLI
// uses the TPM string inside it and applies its anchor as the flag: the
// right pin protects, a wrong one is an integrity failure, none on a bus is
// refused as without the variable.
TEST_F(TrustAnchorTest, TheTpmsecTctiInTpm2ToolsTctiGivesTheTpmAndItsAnchor) {
  std::string name = genuine_name();
  for (std::vector<std::string> args :
       {std::vector<std::string>{"pcr", "extend", "16", kDigest}, std::vector<std::string>{"random", "8"}}) {
    SCOPED_TRACE(args[0]);
    auto ok = via_tcti(args, ",null-name=" + name);
    EXPECT_EQ(ok.exit_code, 0) << describe(ok);
    EXPECT_EQ(ok.err.find("note"), std::string::npos) << ok.err;
    auto bad = via_tcti(args, ",null-name=" + wrong_name());
    EXPECT_EQ(bad.exit_code, kExitIntegrity) << describe(bad);
    EXPECT_EQ(bad.out, "");
    auto none = via_tcti(args, "");
    EXPECT_EQ(none.exit_code, kExitUsage) << describe(none);
    EXPECT_NE(none.err.find("--null-name"), std::string::npos) << none.err;
  }
  auto tofu = via_tcti({"random", "8"}, ",tofu");
  EXPECT_EQ(tofu.exit_code, 0) << describe(tofu);
  EXPECT_NE(tofu.err.find("warning: tofu: trusting"), std::string::npos) << tofu.err;
  // The salt= item is applied: the session is salted to the RSA null key,
  // whose name is not the ECC key's.
  auto rsa_key = tpmsec({"null-key", "--salt", "rsa"});
  ASSERT_EQ(rsa_key.exit_code, 0) << describe(rsa_key);
  std::string rsa_name = rsa_key.out.substr(0, rsa_key.out.find('\n'));
  ASSERT_NE(rsa_name, name);
  auto rsa = via_tcti({"random", "8"}, ",salt=rsa,null-name=" + rsa_name);
  EXPECT_EQ(rsa.exit_code, 0) << describe(rsa);
  auto ecc_pin = via_tcti({"random", "8"}, ",salt=rsa,null-name=" + name);
  EXPECT_EQ(ecc_pin.exit_code, kExitIntegrity) << describe(ecc_pin);
}

// The items count as flags: an anchor there and another here, or a salt= or
// policy= unlike the flag's, is a usage error naming the variable, never a
// silent choice; --tpm names another TPM and the variable is not read.
TEST_F(TrustAnchorTest, TheTpmsecTctiItemsAndFlagsNeverDisagreeSilently) {
  std::string name = genuine_name();
  struct Case {
    std::vector<std::string> flags;
    std::string items;
  };
  for (const Case& c : std::vector<Case>{
           {{"--tofu"}, ",null-name=" + name},
           {{"--null-name", name}, ",tofu"},
           {{"--null-name", name}, ",null-name=" + name},
           {{"--salt", "ecc"}, ",null-name=" + name + ",salt=rsa"},
           {{"--policy", "/nonexistent/a.toml"}, ",null-name=" + name + ",policy=/nonexistent/b.toml"},
           {{"--unsalted"}, ",ek-ca=/etc/ssl/certs"},
       }) {
    std::vector<std::string> args{"pcr", "extend", "16", kDigest};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    SCOPED_TRACE(c.flags[0] + " with" + c.items);
    auto r = via_tcti(args, c.items);
    EXPECT_EQ(r.exit_code, kExitUsage) << describe(r);
    EXPECT_NE(r.err.find("TPM2TOOLS_TCTI"), std::string::npos) << r.err;
  }
  // A flag that agrees with the item is no conflict.
  auto same = via_tcti({"random", "8", "--salt", "ecc"}, ",salt=ecc,null-name=" + name);
  EXPECT_EQ(same.exit_code, 0) << describe(same);
  // --tpm wins and the variable (here naming a wrong pin) is not read.
  auto given = via_tcti({"random", "8", "--tpm", swtpm_->spec(), "--null-name", name}, ",null-name=" + wrong_name());
  EXPECT_EQ(given.exit_code, 0) << describe(given);
  EXPECT_EQ(given.err, "") << given.err;
}

// One grammar: the items TPM2TOOLS_TCTI=tpmsec:… takes are taken by --tpm
// and TPMSEC_TPM too (tpm_config.h), applied as their flags; an item and a
// flag giving an anchor each are one usage line naming both.
TEST_F(TrustAnchorTest, TheTpmStringTakesTheItemsInEveryFrontEnd) {
  std::string name = genuine_name();
  const std::vector<std::string> env{"TPMSEC_STATE_DIR=" + state_, "TPMSEC_BOOT_ID=boot-1", "TPM2TOOLS_TCTI="};
  const std::string pinned = swtpm_->spec() + ",null-name=" + name;
  const std::string wrong = swtpm_->spec() + ",null-name=" + wrong_name();
  for (std::vector<std::string> args :
       {std::vector<std::string>{"pcr", "extend", "16", kDigest}, std::vector<std::string>{"random", "8"}}) {
    SCOPED_TRACE(args[0]);
    auto with = [&](const std::vector<std::string>& more, const std::vector<std::string>& vars) {
      std::vector<std::string> a = args;
      a.insert(a.end(), more.begin(), more.end());
      std::vector<std::string> e = env;
      e.insert(e.end(), vars.begin(), vars.end());
      return run_tpmsec(a, e);
    };
    auto flag = with({"--tpm", pinned}, {"TPMSEC_TPM="});
    EXPECT_EQ(flag.exit_code, 0) << describe(flag);
    EXPECT_EQ(flag.err.find("unknown option"), std::string::npos) << flag.err;
    auto variable = with({}, {"TPMSEC_TPM=" + pinned});
    EXPECT_EQ(variable.exit_code, 0) << describe(variable);
    // The item is used, not dropped: a wrong pin is an integrity failure.
    auto bad = with({"--tpm", wrong}, {"TPMSEC_TPM="});
    EXPECT_EQ(bad.exit_code, kExitIntegrity) << describe(bad);
    auto bad_variable = with({}, {"TPMSEC_TPM=" + wrong});
    EXPECT_EQ(bad_variable.exit_code, kExitIntegrity) << describe(bad_variable);
    // An item and a flag that both name an anchor: exit 2, one line naming both.
    auto twice = with({"--tpm", pinned, "--tofu"}, {"TPMSEC_TPM="});
    EXPECT_EQ(twice.exit_code, kExitUsage) << describe(twice);
    EXPECT_NE(twice.err.find("--tpm names one"), std::string::npos) << twice.err;
    EXPECT_EQ(std::count(twice.err.begin(), twice.err.end(), '\n'), 1) << twice.err;
    auto salts = with({"--tpm", pinned + ",salt=rsa", "--salt", "ecc"}, {"TPMSEC_TPM="});
    EXPECT_EQ(salts.exit_code, kExitUsage) << describe(salts);
    EXPECT_NE(salts.err.find("--salt ecc and --tpm's salt=rsa disagree"), std::string::npos) << salts.err;
  }
  // A malformed item is a usage error in the grammar's words, naming the variable it came in.
  auto malformed = run_tpmsec({"random", "8"}, {"TPMSEC_STATE_DIR=" + state_,
                                                "TPM2TOOLS_TCTI=", "TPMSEC_TPM=" + swtpm_->spec() + ",tofu,tofu"});
  EXPECT_EQ(malformed.exit_code, kExitUsage) << describe(malformed);
  EXPECT_NE(malformed.err.find("TPMSEC_TPM=" + swtpm_->spec() + ",tofu,tofu: a trust anchor"), std::string::npos)
      << malformed.err;
  // A command without protection options names the items it ignores.
  auto info = run_tpmsec({"info", "--tpm", pinned}, env);
  EXPECT_EQ(info.exit_code, 0) << describe(info);
  EXPECT_NE(info.err.find("ignores null-name="), std::string::npos) << info.err;
}

// What a command does not apply is named on stderr: the TCTI's log= on
// every command, the protection items on one that takes no protection
// options (info).
TEST_F(TrustAnchorTest, TheTpmsecTctiItemsACommandIgnoresAreNamed) {
  std::string name = genuine_name();
  auto logged = via_tcti({"random", "8"}, ",null-name=" + name + ",log=/nonexistent/tcti.log");
  EXPECT_EQ(logged.exit_code, 0) << describe(logged);
  EXPECT_NE(logged.err.find("ignores log="), std::string::npos) << logged.err;
  EXPECT_EQ(logged.err.find("null-name="), std::string::npos) << logged.err;
  auto info = via_tcti({"info"}, ",null-name=" + name + ",salt=rsa");
  EXPECT_EQ(info.exit_code, 0) << describe(info);
  EXPECT_NE(info.err.find("ignores null-name=, salt="), std::string::npos) << info.err;
  EXPECT_NE(info.err.find(swtpm_->spec()), std::string::npos) << info.err;
  // policy= on a command with protection options that applies no policy.
  auto policy = via_tcti({"random", "8"}, ",null-name=" + name + ",policy=/nonexistent/policy.toml");
  EXPECT_EQ(policy.exit_code, 0) << describe(policy);
  EXPECT_NE(policy.err.find("ignores policy= (this command applies no policy)"), std::string::npos) << policy.err;
  // On one that applies it, it is used: not named, and its file is read.
  auto applied = via_tcti({"policy", "show"}, ",null-name=" + name + ",policy=/nonexistent/policy.toml");
  EXPECT_EQ(applied.err.find("ignores"), std::string::npos) << applied.err;
  EXPECT_NE(applied.err.find("/nonexistent/policy.toml"), std::string::npos) << applied.err;
}

// policy show uses a named anchor, as --null-name or as TPM2TOOLS_TCTI's
// null-name=: the identity it shows is read through a session salted to
// it, and says so; without one it says it was read without authentication.
TEST_F(TrustAnchorTest, PolicyShowReadsTheIdentityThroughANamedAnchor) {
  std::string name = genuine_name();
  auto line = [](const CommandResult& r) {
    size_t at = r.out.find("\nTPM ");
    return at == std::string::npos ? std::string() : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  auto plain = via_tcti({"policy", "show"}, "");
  EXPECT_EQ(plain.exit_code, 0) << describe(plain);
  EXPECT_NE(line(plain).find("(read without authentication)"), std::string::npos) << plain.out;
  auto item = via_tcti({"policy", "show"}, ",null-name=" + name);
  EXPECT_EQ(item.exit_code, 0) << describe(item);
  EXPECT_NE(line(item).find("(audited)"), std::string::npos) << item.out;
  auto flag = via_tcti({"policy", "show", "--null-name", name}, "");
  EXPECT_EQ(flag.exit_code, 0) << describe(flag);
  EXPECT_NE(line(flag).find("(audited)"), std::string::npos) << flag.out;
  // A wrong name is refused, never shown as audited.
  auto wrong = via_tcti({"policy", "show", "--null-name", "000b" + std::string(64, '0')}, "");
  EXPECT_EQ(wrong.exit_code, testing::kExitIntegrity) << describe(wrong);
}

}  // namespace
}  // namespace tpmsec
