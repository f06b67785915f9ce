// tpm2-tools 5.4's integration scripts that failed through `tpmsec serve`
// and passed through tpm2-abrmd (docs/serve-compatibility.md), each reduced
// to the tool calls that failed: Debian's tpm2-tools through Debian's tabrmd
// TCTI, on a private `dbus-daemon --session`, to `tpmsec serve --tpm
// embedded` (its one wrapper over a handle space per tool run, on libtpms in
// the server's process). Every tool run is a client of its own, as in the
// scripts: what one run leaves (a saved session, a Name the wrapper cached)
// is what the next one meets.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/private_bus.h"
#include "support/run_command.h"
#include "testing/dbus_daemon.h"

namespace tpmsec {
namespace {

using testing::describe;
using testing::run_command;
using testing::spawn;
namespace fs = std::filesystem;

// A fresh bus and a fresh server (so a fresh TPM) per test.
class ServeCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tpmsec-serve-compat-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::string address;
    bus_.pid = testing::start_dbus_daemon({"--session", "--address=unix:path=" + dir_ + "/bus"}, &address);
    ASSERT_GT(bus_.pid, 0);
    ASSERT_FALSE(address.empty()) << "dbus-daemon printed no address";
    bus_env_ = "DBUS_SESSION_BUS_ADDRESS=" + address;
    serve_.pid = spawn({TPMSEC_CLI_PATH, "serve", "--allow-root", "--tpm", "embedded", "--dbus", "session"},
                       {bus_env_, "TPMSEC_STATE_DIR=" + dir_ + "/state"});
    ASSERT_GT(serve_.pid, 0);
    // Up once a tool gets an answer through it.
    bool up = false;
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
         !up && std::chrono::steady_clock::now() < end;) {
      up = tool({"tpm2_getrandom", "--hex", "4"}).exit_code == 0;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(up) << "tpmsec serve never answered on the bus";
  }
  void TearDown() override {
    serve_.stop();
    bus_.stop();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  testing::CommandResult tool(const std::vector<std::string>& argv, const std::string* input = nullptr) {
    return run_command(argv, {bus_env_, "TPM2TOOLS_TCTI=tabrmd:bus_type=session"}, input);
  }
  // Runs the tool and expects it to succeed.
  void ok(const std::vector<std::string>& argv, const std::string* input = nullptr) {
    auto r = tool(argv, input);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
  std::string bus_env_;
  testing::Child bus_;
  testing::Child serve_;
};

// sessionaudit: GetSessionAuditDigest names three of the tool's sessions
// (two HMAC sessions authorizing it, the audit session in its handle area);
// the TPM has three session slots, so the server's own session must give its
// slot up for that command and come back for the next (was
// TPM_RC_SESSION_MEMORY).
TEST_F(ServeCompatTest, SessionAuditDigestWithThreeSessionsOfTheTools) {
  ok({"tpm2_createprimary", "-Q", "-C", "e", "-c", path("prim.ctx")});
  ok({"tpm2_create", "-Q", "-C", path("prim.ctx"), "-c", path("key.ctx"), "-u", path("key.pub"), "-r",
      path("key.priv")});
  ok({"tpm2_startauthsession", "-S", path("audit.ctx"), "--audit-session"});
  ok({"tpm2_getrandom", "8", "-S", path("audit.ctx"), "-o", path("random.bin")});
  ok({"tpm2_getsessionauditdigest", "-c", path("key.ctx"), "-m", path("att.data"), "-s", path("att.sig"), "-S",
      path("audit.ctx")});
  ok({"tpm2_flushcontext", path("audit.ctx")});
  // The server's session came back: a later command still goes through.
  ok({"tpm2_getrandom", "--hex", "8"});
}

// nv: an index read (its Name cached by the server's wrapper), the owner
// hierarchy cleared, the same index defined again with other attributes:
// the next command naming it carries the new index's Name (was
// TPM_RC_BAD_AUTH on the wrapper's own session, a stale Name in cpHash).
TEST_F(ServeCompatTest, AnIndexDefinedAgainAfterClearIsNamedAfresh) {
  const std::string index = "0x1000000";
  ok({"tpm2_nvdefine", index, "-C", "o", "-s", "32", "-a", "ownerread|ownerwrite"});
  ok({"tpm2_nvreadpublic", index});
  ok({"tpm2_clear"});
  ok({"tpm2_nvdefine", index, "-C", "o", "-a", "nt=extend|ownerread|ownerwrite"});
  ok({"tpm2_nvreadpublic", index});
  const std::string data = "foo";
  ok({"tpm2_nvextend", "-C", "o", "-i-", index}, &data);
  ok({"tpm2_nvread", "-C", "o", index, "-o", path("extended.bin")});
  EXPECT_EQ(fs::file_size(path("extended.bin")), 32u);
}

// abrmd_policycphash: a policy session whose PolicyCpHash binds NV_Extend's
// parameters as the tool hashed them. The wrapper must not encrypt them
// (the TPM hashes what it receives): was TPM_RC_POLICY_FAIL. The owner's
// authPolicy (SetPrimaryPolicy) makes the policy independent of the index's
// Name.
TEST_F(ServeCompatTest, PolicyCpHashSessionAuthorizesTheCommandItBinds) {
  const std::string index = "0x1500020";
  const std::string data = "foo";
  ok({"tpm2_nvdefine", index, "-C", "o", "-a", "nt=extend|ownerread|ownerwrite"});
  ok({"tpm2_nvextend", "-C", "o", "-i-", index, "--cphash", path("cp.hash")}, &data);
  ok({"tpm2_startauthsession", "-S", path("trial.ctx"), "-g", "sha256"});
  ok({"tpm2_policycphash", "-S", path("trial.ctx"), "-L", path("cp.policy"), "--cphash-input", path("cp.hash")});
  ok({"tpm2_flushcontext", path("trial.ctx")});
  ok({"tpm2_setprimarypolicy", "-C", "o", "-L", path("cp.policy"), "-g", "sha256"});
  ok({"tpm2_startauthsession", "--policy-session", "-S", path("session.ctx"), "-g", "sha256"});
  ok({"tpm2_policycphash", "-S", path("session.ctx"), "--cphash-input", path("cp.hash")});
  ok({"tpm2_nvextend", "-C", "o", "-P", "session:" + path("session.ctx"), "-i-", index}, &data);
  ok({"tpm2_flushcontext", path("session.ctx")});
  // Another command under the same policy is refused by the TPM, as it
  // must be: the binding held.
  ok({"tpm2_startauthsession", "--policy-session", "-S", path("session.ctx"), "-g", "sha256"});
  ok({"tpm2_policycphash", "-S", path("session.ctx"), "--cphash-input", path("cp.hash")});
  const std::string other = "food";
  auto refused = tool({"tpm2_nvextend", "-C", "o", "-P", "session:" + path("session.ctx"), "-i-", index}, &other);
  EXPECT_NE(refused.exit_code, 0) << describe(refused);
  ok({"tpm2_flushcontext", path("session.ctx")});
}

// changeauth: NV_ChangeAuth in a policy session without PolicyAuthValue is
// answered under the session key alone, not the new authValue (was
// TSS2_RESMGR_RC_GENERAL_FAILURE: the wrapper failed the TPM's genuine
// response HMAC). The new authValue then works.
TEST_F(ServeCompatTest, NvChangeAuthInAPolicySession) {
  const std::string index = "0x1500015";
  ok({"tpm2_startauthsession", "-S", path("trial.ctx")});
  ok({"tpm2_policycommandcode", "-S", path("trial.ctx"), "-L", path("change.policy"), "TPM2_CC_NV_ChangeAuth"});
  ok({"tpm2_flushcontext", path("trial.ctx")});
  ok({"tpm2_nvdefine", index, "-C", "o", "-s", "32", "-a", "authread|authwrite", "-L", path("change.policy")});
  ok({"tpm2_startauthsession", "--policy-session", "-S", path("session.ctx")});
  ok({"tpm2_policycommandcode", "-S", path("session.ctx"), "TPM2_CC_NV_ChangeAuth"});
  ok({"tpm2_changeauth", "-p", "session:" + path("session.ctx"), "-c", index, "newindexauth"});
  const std::string data = "0123456789abcdef";
  ok({"tpm2_nvwrite", index, "-P", "newindexauth", "-i-"}, &data);
  auto wrong = tool({"tpm2_nvwrite", index, "-P", "", "-i-"}, &data);
  EXPECT_NE(wrong.exit_code, 0) << describe(wrong);
}

// setprimarypolicy: HierarchyChangeAuth in a policy session, the same
// response key as NV_ChangeAuth's.
TEST_F(ServeCompatTest, HierarchyChangeAuthInAPolicySession) {
  ok({"tpm2_startauthsession", "-S", path("trial.ctx")});
  ok({"tpm2_policycommandcode", "-S", path("trial.ctx"), "-L", path("change.policy"), "TPM2_CC_HierarchyChangeAuth"});
  ok({"tpm2_flushcontext", path("trial.ctx")});
  ok({"tpm2_setprimarypolicy", "-C", "e", "-L", path("change.policy"), "-g", "sha256"});
  ok({"tpm2_startauthsession", "--policy-session", "-S", path("session.ctx")});
  ok({"tpm2_policycommandcode", "-S", path("session.ctx"), "TPM2_CC_HierarchyChangeAuth"});
  ok({"tpm2_changeauth", "-c", "e", "-p", "session:" + path("session.ctx"), "endorsepass"});
  // The new authValue is the endorsement hierarchy's now.
  ok({"tpm2_changeauth", "-c", "e", "-p", "endorsepass"});
}

}  // namespace
}  // namespace tpmsec
