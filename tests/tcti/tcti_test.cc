// libtss2-tcti-tpmsec.so.0 with real programs on a real TPM: Debian's
// tpm2-tools run unchanged through the TCTI (loaded by path, as tpm2-tss's
// loader takes it) against a swtpm, with the test's interposer on the bus
// between the TCTI and the swtpm, recording every byte or attacking.
#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tss2/tss2_tcti.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>

#include "support/attacker.h"
#include "support/fault_injection.h"
#include "support/interposer.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/test_data.h"
#include "tpmsec/commands.h"
#include "tpmsec/crypto.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/null_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::CommandResult;
using testing::run_command;

using testing::contains;

class TctiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The TCTI keeps the null key's context and the TPM's capabilities
    // between processes: in this suite's own state directory, inherited by
    // every tool it runs.
    state_dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                           ("tpmsec-tcti-state-" + std::to_string(::getpid())));
    std::filesystem::remove_all(*state_dir_);
    ::setenv("TPMSEC_STATE_DIR", state_dir_->c_str(), 1);
    swtpm_ = new testing::SwtpmProcess();
    ASSERT_TRUE(swtpm_->start()) << swtpm_->error();
    // tpmsec's own connection sends Startup and reads the null key's name,
    // the anchor every TCTI below is given (null-name=).
    auto t = open_transport(swtpm_->spec());
    ASSERT_TRUE(t.ok()) << t.error().message();
    Tpm tpm(**t);
    auto key = NullKey::create(tpm, SaltKind::kEcc);
    ASSERT_TRUE(key.ok()) << key.error().message();
    null_name_ = new std::string(key->name_hex());
  }
  static void TearDownTestSuite() {
    delete swtpm_;
    swtpm_ = nullptr;
    delete null_name_;
    null_name_ = nullptr;
    std::filesystem::remove_all(*state_dir_);
    delete state_dir_;
    state_dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(swtpm_ && swtpm_->running());
    proxy_ = std::make_unique<testing::Interposer>(swtpm_->port());
    ASSERT_TRUE(proxy_->start().ok());
    proxy_->set_rule([this](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
      testing::Reply reply = rule_ ? rule_(c, tpm) : testing::pass(c, tpm);
      std::lock_guard<std::mutex> lock(mu_);
      codes_.push_back(c.code);
      bus_.insert(bus_.end(), c.bytes.begin(), c.bytes.end());
      if (reply.response) bus_.insert(bus_.end(), reply.response->begin(), reply.response->end());
      return reply;
    });
    dir_ = std::filesystem::temp_directory_path() / ("tpmsec-tcti-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    proxy_.reset();
    std::filesystem::remove_all(dir_);
  }

  // The TCTI by path, on the interposer's port.
  std::string tcti(const std::string& extra = "") const {
    return std::string(TPMSEC_TCTI_PATH) + ":swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port()) +
           ",null-name=" + *null_name_ + extra;
  }
  // tpm2-tools' own swtpm TCTI, straight to the TPM.
  static std::string direct() { return swtpm_->tcti(); }

  CommandResult tool(std::vector<std::string> argv, const std::string& via) {
    argv.insert(argv.begin() + 1, {"-T", via});
    auto r = run_command(argv);
    proxy_->wait_idle();
    return r;
  }
  // tpm2-tools leaves what it loaded on a TPM without a resource manager
  // (three object slots on swtpm): flushed between tools, as without the TCTI.
  void flush_transients() {
    auto r = run_command({"tpm2_flushcontext", "-T", direct(), "-t"});
    ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  }
  Bytes bus() {
    std::lock_guard<std::mutex> lock(mu_);
    return bus_;
  }
  // No loaded or saved session and no transient object left on the TPM.
  void expect_no_handles_left() {
    for (const char* kind : {"handles-loaded-session", "handles-saved-session", "handles-transient"}) {
      auto left = run_command({"tpm2_getcap", "-T", direct(), kind});
      ASSERT_EQ(left.exit_code, 0) << testing::describe(left);
      EXPECT_EQ(left.out, "") << kind;
    }
  }
  // The interposer that owns the salt key (support/attacker.h) on the bus,
  // substituting its own digest in every PCR_Extend.
  std::unique_ptr<testing::NullKeyAttacker> owns_the_salt_key() {
    auto a = testing::NullKeyAttacker::create(testing::AttackerOptions{Bytes(32, 0x66)});
    EXPECT_TRUE(a.ok()) << a.error().message();
    if (!a.ok()) return nullptr;
    rule_ = (*a)->rule();
    return std::move(*a);
  }
  static std::string slurp(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // The command codes the bus carried, and forgets them.
  std::vector<uint32_t> take_codes() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(codes_, {});
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Keys, signatures, a quote, persistence and a policy session through the
  // TCTI, each checked against tpm2-tools' own results.
  void broad_set_of_tools();
  Bytes pcr16() {
    auto t = open_transport(swtpm_->spec());
    EXPECT_TRUE(t.ok());
    Tpm tpm(**t);
    auto v = pcr_read(tpm, alg::kSha256, 16);
    EXPECT_TRUE(v.ok()) << v.error().message();
    return v.ok() ? *v : Bytes();
  }

  static testing::SwtpmProcess* swtpm_;
  static std::string* null_name_;
  static std::filesystem::path* state_dir_;
  std::unique_ptr<testing::Interposer> proxy_;
  testing::Rule rule_;
  std::mutex mu_;
  Bytes bus_;
  std::vector<uint32_t> codes_;
  std::filesystem::path dir_;
};

testing::SwtpmProcess* TctiTest::swtpm_ = nullptr;
std::string* TctiTest::null_name_ = nullptr;
std::filesystem::path* TctiTest::state_dir_ = nullptr;

TEST_F(TctiTest, GetRandomThroughTheTctiNeverShowsTheBytes) {
  auto r = tool({"tpm2_getrandom", "--hex", "32"}, tcti(",log=" + path("log")));
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  auto random = from_hex(r.out);
  ASSERT_TRUE(random.ok()) << r.out;
  ASSERT_EQ(random->size(), 32u);
  EXPECT_FALSE(contains(bus(), *random));
  std::string text = slurp(path("log"));
  EXPECT_NE(text.find("GetRandom 0x0000017b wrapped=1 encrypted=1"), std::string::npos) << text;
}

// log= is a running log: each program run appends its block, headed by the
// program and its pid, so one file set for every program keeps them all.
TEST_F(TctiTest, TheLogKeepsABlockPerProgramRun) {
  for (int run = 0; run < 2; ++run) {
    auto r = tool({"tpm2_getrandom", "--hex", "8"}, tcti(",log=" + path("log")));
    ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  }
  std::string text = slurp(path("log"));
  size_t headers = 0, blocks = 0;
  for (size_t at = 0; (at = text.find("# tpm2_getrandom pid ", at)) != std::string::npos; ++at) ++headers;
  for (size_t at = 0; (at = text.find("GetRandom 0x0000017b wrapped=1", at)) != std::string::npos; ++at) ++blocks;
  EXPECT_EQ(headers, 2u) << text;
  EXPECT_EQ(blocks, 2u) << text;
}

// What a tpm2_pcrextend costs the TPM through the TCTI once an earlier
// process kept the null key: its context loaded, the session salted to it,
// the key flushed, the extend in the session, the session flushed at
// finalize. No CreatePrimary, no capability read, no cipher check (the
// extend carries no secret).
TEST_F(TctiTest, APcrExtendAfterTheFirstLoadsTheKeptNullKey) {
  std::string digest(64, 'd');
  auto first = tool({"tpm2_pcrextend", "16:sha256=" + digest}, tcti());
  ASSERT_EQ(first.exit_code, 0) << testing::describe(first);
  take_codes();
  Bytes before = pcr16();
  auto second = tool({"tpm2_pcrextend", "16:sha256=" + digest}, tcti());
  ASSERT_EQ(second.exit_code, 0) << testing::describe(second);
  std::vector<uint32_t> codes = take_codes();
  auto expected = pcr_extended_value(alg::kSha256, before, *from_hex(digest));
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(pcr16(), *expected);
  // Before the session: only the handle ledger's listing of a TPM without a
  // resource manager (GetCapability(TPM_CAP_HANDLES), handle_ledger.h). The
  // first run sent one command, so the second's session ends with it: no
  // FlushContext after the extend (wrap.h, end_session_with()).
  const std::vector<uint32_t> session = {cmd::ContextLoad::kInfo.code, cmd::StartAuthSession::kInfo.code,
                                         cmd::FlushContext::kInfo.code, cmd::PcrExtend::kInfo.code};
  ASSERT_GE(codes.size(), session.size());
  EXPECT_EQ(std::vector<uint32_t>(codes.end() - session.size(), codes.end()), session);
  for (size_t i = 0; i + session.size() < codes.size(); ++i) {
    EXPECT_EQ(codes[i], cmd::GetCapability::kInfo.code) << "command " << i;
  }
}

// The session ends with as many commands as the program sent the last time
// (wrap.h, end_session_with()). A run that sends more gets a second session
// for the rest, flushed at finalize, and every extend applied once; the run
// after it ends its one session with its second extend.
TEST_F(TctiTest, AProgramThatSendsMoreThanLastTimeGetsASecondSession) {
  std::string d(64, 'a'), e(64, 'b');
  auto once = tool({"tpm2_pcrextend", "16:sha256=" + d}, tcti());
  ASSERT_EQ(once.exit_code, 0) << testing::describe(once);
  auto count = [](const std::vector<uint32_t>& codes, uint32_t code) {
    return std::count(codes.begin(), codes.end(), code);
  };
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run == 0 ? "one more than last time" : "as many as last time");
    take_codes();
    Bytes before = pcr16();
    auto twice = tool({"tpm2_pcrextend", "16:sha256=" + d, "16:sha256=" + e}, tcti());
    ASSERT_EQ(twice.exit_code, 0) << testing::describe(twice);
    Bytes expected = *pcr_extended_value(alg::kSha256, before, *from_hex(d));
    expected = *pcr_extended_value(alg::kSha256, expected, *from_hex(e));
    EXPECT_EQ(pcr16(), expected);
    std::vector<uint32_t> codes = take_codes();
    EXPECT_EQ(count(codes, cmd::PcrExtend::kInfo.code), 2);
    EXPECT_EQ(count(codes, cmd::StartAuthSession::kInfo.code), run == 0 ? 2 : 1);
    ASSERT_FALSE(codes.empty());
    EXPECT_EQ(codes.back(), run == 0 ? cmd::FlushContext::kInfo.code : cmd::PcrExtend::kInfo.code);
    expect_no_handles_left();
  }
}

// systemd frees its TCTI context without Tss2_Tcti_Finalize and dlcloses the
// library (src/shared/tpm2-util.c, tpm2_context_free()). On this TPM without
// a resource manager the session would stay loaded, a slot of three per run:
// the library's destructor ends it. The second run ends its session with
// systemd's last command: its one FlushContext is the null key's.
TEST_F(TctiTest, SystemdPcrphaseWhichNeverFinalizesLeavesNothingBehind) {
  std::string dir = std::filesystem::path(TPMSEC_TCTI_PATH).parent_path().string();
  // systemd-pcrphase measures only after systemd-stub measured the kernel
  // into PCR 11: the stub's EFI variable in a private mount namespace.
  const std::string script =
      "mount -t tmpfs tpmsec-test /sys/firmware && mkdir -p /sys/firmware/efi/efivars && "
      "printf '\\007\\000\\000\\0001\\0001\\000' "
      ">/sys/firmware/efi/efivars/StubPcrKernelImage-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f && "
      "exec /lib/systemd/systemd-pcrphase --tpm2-device=\"$0\" tpmsec-test";
  std::string device =
      "tpmsec:swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port()) + ",null-name=" + *null_name_;
  std::vector<long> flushes;
  for (int run = 0; run < 2; ++run) {
    take_codes();
    auto r = run_command({"unshare", "-m", "sh", "-c", script, device}, {"LD_LIBRARY_PATH=" + dir});
    proxy_->wait_idle();
    ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
    std::vector<uint32_t> codes = take_codes();
    flushes.push_back(std::count(codes.begin(), codes.end(), cmd::FlushContext::kInfo.code));
    expect_no_handles_left();
  }
  EXPECT_GE(flushes[0], 2);
  EXPECT_EQ(flushes[1], 1);
}

// systemd-creds (systemd 252) seals a credential to the TPM and unseals it
// through the TCTI, loaded by name: the secret never crosses the bus in clear
// either way (Create's sensitive data and Unseal's answer are encrypted, by
// the TCTI's session or by systemd's own salted policy session, which the
// TCTI then leaves as it is), and the TCTI leaves nothing of its own on the
// TPM (systemd 252 leaves its own unseal session loaded, with or without the
// TCTI).
TEST_F(TctiTest, SystemdCredsSealsAndUnsealsThroughIt) {
  const std::string secret = "credential-8e41c7-secret";
  std::string dir = std::filesystem::path(TPMSEC_TCTI_PATH).parent_path().string();
  std::string device =
      "--tpm2-device=tpmsec:swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port()) + ",null-name=" + *null_name_;
  std::ofstream(path("plain")) << secret;
  auto enc = run_command(
      {"systemd-creds", "encrypt", "--with-key=tpm2", device, "--name=tpmsec-test", path("plain"), path("cred")},
      {"LD_LIBRARY_PATH=" + dir});
  proxy_->wait_idle();
  ASSERT_EQ(enc.exit_code, 0) << testing::describe(enc);
  flush_transients();
  expect_no_handles_left();
  // What systemd-creds decrypt leaves loaded: sessions listed, then flushed.
  auto left_by = [&](const std::string& tpm2_device) {
    auto dec = run_command(
        {"systemd-creds", "decrypt", "--tpm2-device=" + tpm2_device, "--name=tpmsec-test", path("cred"), "-"},
        {"LD_LIBRARY_PATH=" + dir});
    proxy_->wait_idle();
    EXPECT_EQ(dec.exit_code, 0) << testing::describe(dec);
    EXPECT_EQ(dec.out, secret);
    flush_transients();
    auto left = run_command({"tpm2_getcap", "-T", direct(), "handles-loaded-session"});
    auto flushed = run_command({"tpm2_flushcontext", "-T", direct(), "-l"});
    EXPECT_EQ(flushed.exit_code, 0) << testing::describe(flushed);
    return std::count(left.out.begin(), left.out.end(), '\n');
  };
  long through = left_by(device.substr(std::string_view("--tpm2-device=").size()));
  EXPECT_FALSE(contains(bus(), as_bytes(std::string_view(secret))));
  long without = left_by(direct());
  EXPECT_EQ(through, without) << "sessions left loaded through the TCTI and without it";
  expect_no_handles_left();
}

// /etc/crypttab through systemd 252's own code: systemd-cryptsetup-generator
// turns the line into the unit whose ExecStart runs systemd-cryptsetup with
// the options field as it is (an unknown escape such as `\,` is kept by
// ExecStart's parser, systemd src/basic/extract-word.c, UNESCAPE_RELAX), and
// systemd-cryptsetup splits it at every comma not written `\,`
// (src/cryptsetup/cryptsetup.c, parse_crypt_config()). With each comma of
// tpm2-device= escaped, the TCTI gets its whole configuration and unseals
// the volume key (activation needs device-mapper, which a test host may
// lack: the Unseal on the bus is the proof). With plain commas it gets
// `swtpm:host=127.0.0.1` alone and refuses it, connecting nowhere.
TEST_F(TctiTest, ACrypttabLineWithItsCommasEscapedUnsealsThroughIt) {
  const std::vector<std::string> env = {"LD_LIBRARY_PATH=" +
                                        std::filesystem::path(TPMSEC_TCTI_PATH).parent_path().string()};
  const std::string volume = "tpmsectest" + std::to_string(::getpid());  // no unit-name escaping
  const std::string image = path("volume.img");
  const std::string device = "tpmsec:swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port()) +
                             ",null-name=" + *null_name_ + ",log=" + path("log");
  std::ofstream(image).close();
  std::filesystem::resize_file(image, 32 << 20);
  const std::string passphrase = "volume-passphrase";
  auto format = run_command({"cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
                             "--pbkdf-force-iterations", "1000", "--key-file=-", image},
                            {}, &passphrase);
  ASSERT_EQ(format.exit_code, 0) << testing::describe(format);
  // Enrolled straight to the TPM: systemd-cryptenroll holds two TPM
  // contexts at once, which the interposer (one client at a time) cannot
  // serve; tpm2-tss's swtpm TCTI connects per command.
  auto enroll = run_command({"systemd-cryptenroll", "--tpm2-device=" + direct(), "--tpm2-pcrs=", image},
                            {"PASSWORD=" + passphrase});
  ASSERT_EQ(enroll.exit_code, 0) << testing::describe(enroll);
  // What systemd leaves loaded (its own sessions, as without the TCTI).
  auto flush_left = [&] {
    flush_transients();
    auto flushed = run_command({"tpm2_flushcontext", "-T", direct(), "-l"});
    EXPECT_EQ(flushed.exit_code, 0) << testing::describe(flushed);
  };
  flush_left();

  // The options field of the unit the generator makes of the crypttab line.
  auto through_generator = [&](const std::string& options) {
    std::ofstream(path("crypttab")) << volume << " " << image << " none " << options << "\n";
    std::filesystem::remove_all(path("gen"));
    for (const char* d : {"gen/normal", "gen/early", "gen/late"}) std::filesystem::create_directories(path(d));
    auto gen = run_command({"/lib/systemd/system-generators/systemd-cryptsetup-generator", path("gen/normal"),
                            path("gen/early"), path("gen/late")},
                           {"SYSTEMD_CRYPTTAB=" + path("crypttab")});
    EXPECT_EQ(gen.exit_code, 0) << testing::describe(gen);
    std::string unit = slurp(path("gen/normal/systemd-cryptsetup@" + volume + ".service"));
    std::smatch m;
    EXPECT_TRUE(std::regex_search(unit, m, std::regex("\nExecStart=\\S+ attach '[^']*' '[^']*' '[^']*' '([^']*)'\n")))
        << unit;
    return m.size() > 1 ? m[1].str() : std::string();
  };
  auto attach = [&](const std::string& options) {
    take_codes();
    auto r = run_command({"/lib/systemd/systemd-cryptsetup", "attach", volume, image, "none", options}, env);
    proxy_->wait_idle();
    if (r.exit_code == 0) run_command({"/lib/systemd/systemd-cryptsetup", "detach", volume});  // a host with dm
    return r;
  };
  std::string escaped = std::regex_replace(device, std::regex(","), "\\,");
  std::string options = through_generator("tpm2-device=" + escaped + ",headless");
  EXPECT_EQ(options, "tpm2-device=" + escaped + ",headless");
  auto unlocked = attach(options);
  std::vector<uint32_t> codes = take_codes();
  EXPECT_EQ(std::count(codes.begin(), codes.end(), cmd::Unseal::kInfo.code), 1) << testing::describe(unlocked);
  EXPECT_EQ(unlocked.err.find("tpmsec TCTI:"), std::string::npos) << unlocked.err;
  EXPECT_NE(slurp(path("log")).find("# /lib/systemd/systemd-cryptsetup pid"), std::string::npos)
      << "log=, the last item, never reached the TCTI";
  flush_left();

  auto cut = attach(through_generator("tpm2-device=" + device + ",headless"));
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.err.find("tpmsec TCTI: 'swtpm:host=127.0.0.1' names no port= and no anchor"), std::string::npos)
      << cut.err;
  EXPECT_NE(cut.err.find("\\,"), std::string::npos) << cut.err;
  EXPECT_EQ(take_codes(), std::vector<uint32_t>{});
}

// A library error's advice is in the TCTI's own terms, its items, never the
// CLI's flags: an ek-ca= anchor on a TPM with no EK certificate (a fresh
// swtpm) names null-name= and tofu.
TEST_F(TctiTest, AdviceNamesTheItemsNotTheFlags) {
  const std::string config = std::string(TPMSEC_TCTI_PATH) +
                             ":swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port()) + ",ek-ca=/etc/ssl/certs";
  auto r = tool({"tpm2_getrandom", "--hex", "8"}, config);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tpmsec TCTI: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("anchor it with null-name=HEX|FILE or tofu instead of ek-ca="), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--null-name"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--tofu"), std::string::npos) << r.err;
}

// What the TCTI can tell of a configuration it only half received is
// refused at init (TSS2_TCTI_RC_BAD_VALUE) with one line, before it connects
// anywhere: a bus TPM with no port and no anchor (the rest cut at a comma),
// an item ending in a backslash (`\,` nobody unescaped).
TEST_F(TctiTest, AConfigurationItOnlyHalfReceivedIsRefusedAtInit) {
  void* lib = ::dlopen(TPMSEC_TCTI_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto info_of = reinterpret_cast<const TSS2_TCTI_INFO* (*)()>(::dlsym(lib, "Tss2_Tcti_Info"));
  ASSERT_NE(info_of, nullptr);
  auto init = [&](const std::string& config) {
    size_t size = 0;
    EXPECT_EQ(info_of()->init(nullptr, &size, config.c_str()), TSS2_RC_SUCCESS);
    std::vector<uint64_t> memory(size / sizeof(uint64_t) + 1);
    auto* ctx = reinterpret_cast<TSS2_TCTI_CONTEXT*>(memory.data());
    TSS2_RC rc = info_of()->init(ctx, &size, config.c_str());
    if (rc == TSS2_RC_SUCCESS) reinterpret_cast<TSS2_TCTI_CONTEXT_COMMON_V1*>(ctx)->finalize(ctx);
    return rc;
  };
  const std::string port = std::to_string(proxy_->port());
  const std::string escaped = "swtpm:host=127.0.0.1\\,port=" + port + "\\,null-name=" + *null_name_;
  for (const std::string& half : {std::string("swtpm:host=127.0.0.1"), std::string("mssim:host=127.0.0.1"), escaped}) {
    EXPECT_EQ(init(half), TSS2_TCTI_RC_BAD_VALUE) << half;
    auto r = tool({"tpm2_getrandom", "--hex", "8"}, std::string(TPMSEC_TCTI_PATH) + ":" + half);
    EXPECT_NE(r.exit_code, 0) << half;
    EXPECT_NE(r.err.find("tpmsec TCTI: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("\\,"), std::string::npos) << r.err;
  }
  EXPECT_EQ(take_codes(), std::vector<uint32_t>{});
  // Whole, with port= or an anchor, it connects.
  EXPECT_EQ(init("swtpm:host=127.0.0.1,port=" + port + ",null-name=" + *null_name_), TSS2_RC_SUCCESS);
  ::dlclose(lib);
  expect_no_handles_left();
}

// A program that forks after it opened the TCTI, whose child exits (running
// the library's destructor: a C++ library with unique symbols is not
// unloaded by dlclose, so its destructor runs at exit, systemd's too): the child
// shares the parent's connection and must not end the parent's session on
// it. Nothing goes on the bus from the child, and the parent's next command
// is in the same session.
TEST_F(TctiTest, AForkedChildLeavesTheParentsSessionAlone) {
  void* lib = ::dlopen(TPMSEC_TCTI_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << ::dlerror();
  auto info_of = reinterpret_cast<const TSS2_TCTI_INFO* (*)()>(::dlsym(lib, "Tss2_Tcti_Info"));
  ASSERT_NE(info_of, nullptr);
  const TSS2_TCTI_INFO* info = info_of();
  const std::string config = tcti().substr(std::string(TPMSEC_TCTI_PATH).size() + 1);
  size_t size = 0;
  ASSERT_EQ(info->init(nullptr, &size, config.c_str()), TSS2_RC_SUCCESS);
  std::vector<uint64_t> memory(size / sizeof(uint64_t) + 1);
  auto* ctx = reinterpret_cast<TSS2_TCTI_CONTEXT*>(memory.data());
  ASSERT_EQ(info->init(ctx, &size, config.c_str()), TSS2_RC_SUCCESS);
  auto* common = reinterpret_cast<TSS2_TCTI_CONTEXT_COMMON_V1*>(ctx);
  auto get_random = [&] {
    const uint8_t command[] = {0x80, 0x01, 0, 0, 0, 12, 0, 0, 0x01, 0x7B, 0, 8};  // GetRandom(8)
    if (common->transmit(ctx, sizeof(command), command) != TSS2_RC_SUCCESS) return false;
    uint8_t response[64];
    size_t got = sizeof(response);
    return common->receive(ctx, &got, response, TSS2_TCTI_TIMEOUT_BLOCK) == TSS2_RC_SUCCESS && got == 20 &&
           load_be32(response + 6) == 0;
  };
  ASSERT_TRUE(get_random());
  take_codes();
  pid_t child = ::fork();
  if (child == 0) std::exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));  // its status is LeakSanitizer's in a sanitized tree
  // A command of the child's would have been answered (and so recorded)
  // before it exited.
  EXPECT_EQ(take_codes(), std::vector<uint32_t>{}) << "the child sent commands on the parent's connection";
  ASSERT_TRUE(get_random());
  std::vector<uint32_t> codes = take_codes();
  EXPECT_EQ(std::count(codes.begin(), codes.end(), cmd::StartAuthSession::kInfo.code), 0) << "a new session";
  common->finalize(ctx);
  ::dlclose(lib);
  expect_no_handles_left();
}

// A program killed (SIGKILL) while the TCTI's session and the null key are
// loaded: the interposer kills the tool when the key's FlushContext, after
// StartAuthSession, reaches the bus, and drops it. On this TPM without a
// resource manager both stay loaded; three such runs would fill its session
// and object slots. Each next start flushes what the dead one's record names
// (held_handles.h): the last run succeeds and leaves nothing behind.
TEST_F(TctiTest, AProgramKilledMidRunLeavesNothingForTheNextStart) {
  const std::string pid_file = path("pid");
  std::atomic<bool> armed{true}, started{false};
  std::atomic<int> killed{0};
  rule_ = [&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    if (armed && c.code == cmd::StartAuthSession::kInfo.code) started = true;
    if (armed && started && c.code == cmd::FlushContext::kInfo.code) {
      started = false;
      std::ifstream in(pid_file);
      pid_t pid = 0;
      if (in >> pid && pid > 0 && ::kill(pid, SIGKILL) == 0) ++killed;
      return testing::Reply::close();
    }
    return testing::pass(c, tpm);
  };
  const std::string via = tcti();
  for (int run = 0; run < 3; ++run) {
    auto r = run_command(
        {"sh", "-c", "echo $$ >\"$0\" && exec \"$@\"", pid_file, "tpm2_getrandom", "-T", via, "--hex", "8"});
    proxy_->wait_idle();
    EXPECT_EQ(r.exit_code, 128 + SIGKILL) << testing::describe(r);
  }
  EXPECT_EQ(killed, 3);
  // The last one's session and key are there (what the next start must end).
  auto left = run_command({"tpm2_getcap", "-T", direct(), "handles-loaded-session"});
  EXPECT_NE(left.out, "") << "no session left by the killed run: the test proves nothing";
  armed = false;
  auto r = tool({"tpm2_getrandom", "--hex", "8"}, via);
  EXPECT_EQ(r.exit_code, 0) << testing::describe(r);
  EXPECT_NE(r.err.find("tpmsec TCTI: flushed what a process that ended without flushing left on the TPM: 0x"),
            std::string::npos)
      << r.err;
  expect_no_handles_left();
}

// What the next start flushes is only what a dead process's record names: a
// session recorded for a process that still runs (this test's) and one that
// no record names (another program's leak) are left alone. The third, with
// the three session slots taken, is recorded for a process that ended (this
// pid, reused: it started at another time): flushed, so the tool gets a slot.
TEST_F(TctiTest, TheNextStartFlushesOnlyWhatADeadProcessRecorded) {
  auto t = open_transport(swtpm_->spec());
  ASSERT_TRUE(t.ok()) << t.error().message();
  Tpm tpm(**t);
  std::vector<uint32_t> sessions;
  for (int i = 0; i < 3; ++i) {
    cmd::StartAuthSession c;
    c.nonce_caller.bytes = Bytes(32, static_cast<uint8_t>(i + 1));
    auto rsp = tpm.run(c);
    ASSERT_TRUE(rsp.ok()) << rsp.error().message();
    sessions.push_back(rsp->session_handle);
  }
  t->reset();  // closed, the sessions left loaded
  FileHostState host;
  auto self = host.this_process();
  ASSERT_TRUE(self.ok()) << self.error().message();
  auto boot = host.boot_id();
  ASSERT_TRUE(boot.ok());
  const TpmId id = TpmId::of("swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port()));
  HeldHandlesRecord dead{{self->pid, self->start + 1, self->pid_namespace}, 1, *boot, {{sessions[0], false}}};
  HeldHandlesRecord live{*self, 2, *boot, {{sessions[1], false}}};
  ASSERT_TRUE(host.put_held_handles(id, dead).ok());
  ASSERT_TRUE(host.put_held_handles(id, live).ok());
  auto r = tool({"tpm2_getrandom", "--hex", "8"}, tcti());
  EXPECT_EQ(r.exit_code, 0) << testing::describe(r);
  auto left = run_command({"tpm2_getcap", "-T", direct(), "handles-loaded-session"});
  EXPECT_EQ(left.out, fmt::format("- 0x{:X}\n- 0x{:X}\n", sessions[1], sessions[2]));
  auto records = host.held_handles(id);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].owner, *self);
  for (uint32_t h : {sessions[1], sessions[2]}) {
    auto f = run_command({"tpm2_flushcontext", "-T", direct(), fmt::format("0x{:x}", h)});
    EXPECT_EQ(f.exit_code, 0) << testing::describe(f);
  }
  live.handles.clear();
  EXPECT_TRUE(host.put_held_handles(id, live).ok());
  expect_no_handles_left();
}

TEST_F(TctiTest, PcrExtendAndReadGiveTheSameResultsAsWithout) {
  std::string digest(64, 'c');
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + digest}, tcti());
  ASSERT_EQ(ext.exit_code, 0) << testing::describe(ext);
  auto through = tool({"tpm2_pcrread", "sha256:16"}, tcti());
  auto plain = run_command({"tpm2_pcrread", "-T", direct(), "sha256:16"});
  ASSERT_EQ(through.exit_code, 0) << testing::describe(through);
  ASSERT_EQ(plain.exit_code, 0) << testing::describe(plain);
  EXPECT_EQ(through.out, plain.out);
}

// tpm2-tools 5.4 authorizes Create, Unseal, NV_Write and NV_Read with an
// unsalted HMAC session of its own. With an empty authValue the TCTI
// re-signs it and encrypts (wrap.h); with a password it cannot (the HMAC key
// is the password), so that Unseal's data is only audited — but the password
// itself never crosses the bus either way.
TEST_F(TctiTest, SealAndUnsealKeepDataAndPasswordOffTheBus) {
  const std::string secret = "sealed-secret-4b1d9e";
  const std::string other = "sealed-with-password-0c77";
  const std::string password = "object-password-77c2";
  std::ofstream(path("secret")) << secret;
  std::ofstream(path("other")) << other;
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}, tcti()).exit_code, 0);
  flush_transients();
  auto create = tool(
      {"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("seal.pub"), "-r", path("seal.priv")},
      tcti(",log=" + path("log")));
  ASSERT_EQ(create.exit_code, 0) << testing::describe(create);
  std::string text = slurp(path("log"));
  // ESYS may send it again after a TPM_RC_RETRY: every one encrypted.
  EXPECT_TRUE(std::regex_search(text, std::regex("Create 0x00000153 wrapped=([0-9]+) encrypted=\\1 passed=0 ")))
      << text;
  flush_transients();
  auto create_pw = tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("other"), "-u", path("pw.pub"), "-r",
                         path("pw.priv"), "-p", password},
                        tcti());
  ASSERT_EQ(create_pw.exit_code, 0) << testing::describe(create_pw);
  flush_transients();
  for (const char* name : {"seal", "pw"}) {
    auto load = tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path(std::string(name) + ".pub"), "-r",
                      path(std::string(name) + ".priv"), "-c", path(std::string(name) + ".ctx")},
                     tcti());
    ASSERT_EQ(load.exit_code, 0) << testing::describe(load);
    flush_transients();
  }
  auto unseal = tool({"tpm2_unseal", "-c", path("seal.ctx")}, tcti());
  ASSERT_EQ(unseal.exit_code, 0) << testing::describe(unseal);
  EXPECT_EQ(unseal.out, secret);
  flush_transients();
  auto unseal_pw = tool({"tpm2_unseal", "-c", path("pw.ctx"), "-p", password}, tcti());
  ASSERT_EQ(unseal_pw.exit_code, 0) << testing::describe(unseal_pw);
  EXPECT_EQ(unseal_pw.out, other);
  flush_transients();
  EXPECT_FALSE(contains(bus(), as_bytes(secret)));
  EXPECT_FALSE(contains(bus(), as_bytes(password)));
}

TEST_F(TctiTest, NvDefineWriteReadKeepDataOffTheBus) {
  const std::string data = "nv-data-0123456789abcdef-9e8d7c";
  std::ofstream(path("data")) << data;
  const std::string index = "0x1500016";
  auto def = tool({"tpm2_nvdefine", index, "-C", "o", "-s", std::to_string(data.size()), "-a", "ownerread|ownerwrite"},
                  tcti());
  ASSERT_EQ(def.exit_code, 0) << testing::describe(def);
  auto write = tool({"tpm2_nvwrite", index, "-C", "o", "-i", path("data")}, tcti(",log=" + path("log")));
  ASSERT_EQ(write.exit_code, 0) << testing::describe(write);
  std::string text = slurp(path("log"));
  EXPECT_NE(text.find("NV_Write 0x00000137 wrapped=1 encrypted=1 passed=0"), std::string::npos) << text;
  auto read = tool({"tpm2_nvread", index, "-C", "o", "-s", std::to_string(data.size())}, tcti());
  ASSERT_EQ(read.exit_code, 0) << testing::describe(read);
  EXPECT_EQ(read.out, data);
  auto plain = run_command({"tpm2_nvread", "-T", direct(), index, "-C", "o", "-s", std::to_string(data.size())});
  EXPECT_EQ(plain.out, data);
  auto undef = tool({"tpm2_nvundefine", index, "-C", "o"}, tcti());
  EXPECT_EQ(undef.exit_code, 0) << testing::describe(undef);
  EXPECT_FALSE(contains(bus(), as_bytes(data)));
}

// tpm2_changeauth authorizes with an unsalted session of its own: re-signed
// under the empty owner authValue, with the TPM's answer under the new one
// (HierarchyChangeAuth), then only audited under the non-empty one.
TEST_F(TctiTest, ChangeAuthKeepsTheNewPasswordOffTheBus) {
  const std::string password = "new-owner-password-31ab";
  auto set = tool({"tpm2_changeauth", "-c", "o", password}, tcti(",log=" + path("log")));
  ASSERT_EQ(set.exit_code, 0) << testing::describe(set);
  std::string text = slurp(path("log"));
  EXPECT_NE(text.find("HierarchyChangeAuth 0x00000129 wrapped=1 encrypted=1 passed=0"), std::string::npos) << text;
  auto back = tool({"tpm2_changeauth", "-c", "o", "-p", password}, tcti());
  EXPECT_EQ(back.exit_code, 0) << testing::describe(back);
  auto plain = run_command({"tpm2_createprimary", "-T", direct(), "-C", "o", "-c", path("p.ctx")});
  EXPECT_EQ(plain.exit_code, 0) << "the owner password was not put back: " << testing::describe(plain);
  flush_transients();
  EXPECT_FALSE(contains(bus(), as_bytes(password)));
}

TEST_F(TctiTest, ASwappedExtendDigestFailsTheToolAndNeverReachesThePcr) {
  Bytes before = pcr16();
  Bytes digest(32, 0xd1), forged(32, 0xe7);
  rule_ = [&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    Bytes frame = c.bytes;
    if (c.code == 0x182) {
      auto at = std::search(frame.begin(), frame.end(), digest.begin(), digest.end());
      if (at != frame.end()) std::copy(forged.begin(), forged.end(), at);
    }
    auto r = tpm.transmit(frame);
    return r.ok() ? testing::Reply::answer(*r) : testing::Reply::close();
  };
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + to_hex(digest)}, tcti());
  EXPECT_NE(ext.exit_code, 0) << testing::describe(ext);
  EXPECT_EQ(pcr16(), before);
  EXPECT_NE(pcr16(), *pcr_extended_value(alg::kSha256, before, forged));
}

TEST_F(TctiTest, AForgedResponseFailsTheToolWithOneLine) {
  rule_ = [&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    auto r = tpm.transmit(c.bytes);
    if (!r.ok()) return testing::Reply::close();
    Bytes forged = *r;
    if (c.code == 0x17B && forged.size() > 40) forged[forged.size() - 40] ^= 1;
    return testing::Reply::answer(forged);
  };
  auto r = tool({"tpm2_getrandom", "--hex", "32"}, tcti());
  EXPECT_NE(r.exit_code, 0) << testing::describe(r);
  EXPECT_NE(r.err.find("tpmsec TCTI: response refused: GetRandom response: response HMAC"), std::string::npos) << r.err;
}

// A TPM whose session slots are full (another client's sessions left
// loaded on a TPM without a resource manager; here the interposer says so
// for the TPM): the refusal says how to look and mend.
TEST_F(TctiTest, FullSessionSlotsAreRefusedWithAHint) {
  rule_ = [&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    if (c.code == cmd::StartAuthSession::kInfo.code) return testing::Reply::answer(error_response(rc::kSessionMemory));
    return testing::pass(c, tpm);
  };
  auto r = tool({"tpm2_getrandom", "--hex", "8"}, tcti());
  EXPECT_NE(r.exit_code, 0) << testing::describe(r);
  EXPECT_NE(r.err.find("tpmsec TCTI: response refused: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("session slots are full"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tpm2_flushcontext -l"), std::string::npos) << r.err;
}

// The TCTI's items are named as the TCTI spells them: its tofu warning
// says `tofu`, not the CLI's `--tofu`.
TEST_F(TctiTest, TheTofuWarningNamesTheItem) {
  std::string config =
      std::string(TPMSEC_TCTI_PATH) + ":swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port()) + ",tofu";
  auto r = run_command({"tpm2_getrandom", "-T", config, "--hex", "8"}, {"TPMSEC_STATE_DIR=" + path("state")});
  proxy_->wait_idle();
  EXPECT_EQ(r.exit_code, 0) << testing::describe(r);
  EXPECT_NE(r.err.find("tpmsec TCTI: warning: tofu: trusting the null key"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--tofu"), std::string::npos) << r.err;
}

// log= at a symbolic link in a directory others can write: refused, and
// said as the refusal it is, not as ELOOP's "Too many levels of symbolic links".
TEST_F(TctiTest, ALogAtAPlantedLinkIsRefusedInWords) {
  std::filesystem::create_directories(path("shared"));
  std::filesystem::permissions(path("shared"), std::filesystem::perms::all | std::filesystem::perms::sticky_bit);
  std::ofstream(path("target")) << "";
  std::filesystem::create_symlink(path("target"), path("shared/log"));
  auto r = tool({"tpm2_getrandom", "--hex", "8"}, tcti(",log=" + path("shared/log")));
  EXPECT_EQ(r.exit_code, 0) << testing::describe(r);
  EXPECT_NE(r.err.find("a symbolic link: refused, never followed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Too many levels"), std::string::npos) << r.err;
  EXPECT_EQ(slurp(path("target")), "");
}

TEST_F(TctiTest, ADroppedResponseFailsTheToolAndExtendsOnce) {
  Bytes before = pcr16();
  Bytes digest(32, 0xa5);
  rule_ = [&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    auto r = tpm.transmit(c.bytes);
    if (!r.ok() || c.code == 0x182) return testing::Reply::close();
    return testing::Reply::answer(*r);
  };
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + to_hex(digest)}, tcti());
  EXPECT_NE(ext.exit_code, 0) << testing::describe(ext);
  EXPECT_EQ(pcr16(), *pcr_extended_value(alg::kSha256, before, digest));
}

TEST_F(TctiTest, FlushingEverySessionThroughItLeavesNothingBehind) {
  // tpm2_flushcontext -l flushes every loaded session it lists: the listing
  // comes without the TCTI's own (as it would without the TCTI), so it
  // flushes none here, and the TCTI's session ends as it would. (A program
  // that flushes the TCTI's session by its number gets a new one for its
  // next command: WrapTest.TheCallerFlushingTheSessionStartsAnother.)
  auto flush = tool({"tpm2_flushcontext", "-l"}, tcti(",log=" + path("log")));
  ASSERT_EQ(flush.exit_code, 0) << testing::describe(flush);
  std::string text = slurp(path("log"));
  EXPECT_NE(text.find("GetCapability 0x0000017a wrapped=1"), std::string::npos) << text;
  EXPECT_EQ(text.find("FlushContext"), std::string::npos) << text;
  auto random = tool({"tpm2_getrandom", "--hex", "8"}, tcti());
  EXPECT_EQ(random.exit_code, 0) << testing::describe(random);
  expect_no_handles_left();
}

// The attacker flushes the TCTI's session just before a command reaches the
// TPM. GetRandom changes nothing: sent again on a new session. PCR_Extend
// does: the TPM's error goes to the tool, and the PCR is extended never.
TEST_F(TctiTest, ASessionFlushedBehindItsBackIsNeverAReasonToApplyACommandTwice) {
  auto flush_first = [](uint32_t code, size_t session_at) {
    return [code, session_at, done = false](const testing::ProxiedCommand& c, testing::Upstream& tpm) mutable {
      if (c.code == code && !done && c.bytes.size() >= session_at + 4) {
        done = true;
        Writer w;
        w.u16(st::kNoSessions);
        w.u32(14);
        w.u32(0x165);  // FlushContext
        w.u32(load_be32(c.bytes.data() + session_at));
        auto flushed = tpm.transmit(*w.finish());
        if (!flushed.ok()) return testing::Reply::close();
      }
      return testing::pass(c, tpm);
    };
  };
  rule_ = flush_first(0x17B, 14);  // GetRandom: header, authorizationSize, then the session
  auto random = tool({"tpm2_getrandom", "--hex", "8"}, tcti(",log=" + path("log")));
  EXPECT_EQ(random.exit_code, 0) << testing::describe(random);
  EXPECT_EQ(random.out.size(), 16u) << random.out;
  std::string text = slurp(path("log"));
  EXPECT_NE(text.find("GetRandom 0x0000017b wrapped=2 encrypted=2"), std::string::npos) << text;

  Bytes before = pcr16();
  rule_ = flush_first(0x182, 18);  // PCR_Extend: header, the PCR, authorizationSize, then the session
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + std::string(64, 'e')}, tcti());
  EXPECT_NE(ext.exit_code, 0) << testing::describe(ext);
  EXPECT_EQ(pcr16(), before);
  rule_ = nullptr;
  auto again = tool({"tpm2_pcrextend", "16:sha256=" + std::string(64, 'e')}, tcti());
  EXPECT_EQ(again.exit_code, 0) << testing::describe(again);
  EXPECT_EQ(pcr16(), *pcr_extended_value(alg::kSha256, before, Bytes(32, 0xee)));
}

// A broad set of tpm2-tools through the TCTI: signatures and quotes verify,
// objects persist and go, a policy session's digest is the one without it.
// Twice: the second time each tool's session ends with its last wrapped
// command (wrap.h, end_session_with()), whatever command that is.
TEST_F(TctiTest, ABroadSetOfToolsWorksThroughIt) {
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run == 0 ? "first run of each tool" : "each tool's session ends with its last command");
    broad_set_of_tools();
  }
}

void TctiTest::broad_set_of_tools() {
  auto ok = [&](std::vector<std::string> argv) {
    auto r = tool(argv, tcti());
    EXPECT_EQ(r.exit_code, 0) << argv[0] << ": " << testing::describe(r);
    flush_transients();
    return r;
  };
  std::ofstream(path("msg")) << "a message to sign";
  ok({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx"), "-Q"});
  ok({"tpm2_create", "-C", path("prim.ctx"), "-G", "ecc", "-u", path("k.pub"), "-r", path("k.priv"), "-Q"});
  ok({"tpm2_load", "-C", path("prim.ctx"), "-u", path("k.pub"), "-r", path("k.priv"), "-c", path("k.ctx"), "-Q"});
  ok({"tpm2_sign", "-c", path("k.ctx"), "-g", "sha256", "-o", path("sig"), path("msg")});
  ok({"tpm2_verifysignature", "-c", path("k.ctx"), "-g", "sha256", "-m", path("msg"), "-s", path("sig")});
  ok({"tpm2_quote", "-c", path("k.ctx"), "-l", "sha256:16", "-q", "abcd", "-m", path("q.msg"), "-s", path("q.sig"),
      "-o", path("q.pcrs"), "-g", "sha256", "-Q"});
  ok({"tpm2_readpublic", "-c", path("k.ctx"), "-o", path("k.pem"), "-f", "pem", "-Q"});
  auto check = run_command({"tpm2_checkquote", "-u", path("k.pem"), "-m", path("q.msg"), "-s", path("q.sig"), "-f",
                            path("q.pcrs"), "-g", "sha256", "-q", "abcd"});
  EXPECT_EQ(check.exit_code, 0) << testing::describe(check);
  ok({"tpm2_evictcontrol", "-C", "o", "-c", path("prim.ctx"), "0x81000005", "-Q"});
  ok({"tpm2_evictcontrol", "-C", "o", "-c", "0x81000005", "-Q"});
  auto digest = [&](const std::string& via) {
    auto start = run_command({"tpm2_startauthsession", "-T", via, "--policy-session", "-S", path("s.ctx")});
    EXPECT_EQ(start.exit_code, 0) << testing::describe(start);
    proxy_->wait_idle();
    auto pcr = run_command({"tpm2_policypcr", "-T", via, "-S", path("s.ctx"), "-l", "sha256:16"});
    EXPECT_EQ(pcr.exit_code, 0) << testing::describe(pcr);
    proxy_->wait_idle();
    auto flush = run_command({"tpm2_flushcontext", "-T", via, path("s.ctx")});
    EXPECT_EQ(flush.exit_code, 0) << testing::describe(flush);
    proxy_->wait_idle();
    return pcr.out;
  };
  EXPECT_EQ(digest(tcti()), digest(direct()));
  for (const char* kind : {"handles-loaded-session", "handles-saved-session", "handles-persistent"}) {
    auto left = run_command({"tpm2_getcap", "-T", direct(), kind});
    EXPECT_EQ(left.out, "") << kind;
  }
}

// tpm2_encryptdecrypt, as tpm2-tools' integration test runs it: an AES key
// under an endorsement primary, encrypted and decrypted back through the TCTI.
TEST_F(TctiTest, EncryptDecryptRoundTripsThroughIt) {
  const std::string secret = "plaintext for the AES key 6c1e";
  std::ofstream(path("secret")) << secret;
  auto ok = [&](std::vector<std::string> argv) {
    auto r = tool(argv, tcti());
    EXPECT_EQ(r.exit_code, 0) << argv[0] << ": " << testing::describe(r);
    flush_transients();
    return r.exit_code == 0;
  };
  ASSERT_TRUE(ok({"tpm2_createprimary", "-Q", "-C", "e", "-g", "sha1", "-G", "rsa", "-c", path("primary.ctx")}));
  ASSERT_TRUE(ok({"tpm2_create", "-Q", "-g", "sha256", "-G", "aes", "-u", path("key.pub"), "-r", path("key.priv"), "-C",
                  path("primary.ctx")}));
  ASSERT_TRUE(ok({"tpm2_load", "-Q", "-C", path("primary.ctx"), "-u", path("key.pub"), "-r", path("key.priv"), "-c",
                  path("key.ctx")}));
  ASSERT_TRUE(ok({"tpm2_encryptdecrypt", "-Q", "-c", path("key.ctx"), "-o", path("enc"), path("secret")}));
  ASSERT_TRUE(ok({"tpm2_encryptdecrypt", "-Q", "-c", path("key.ctx"), "-d", "-o", path("dec"), path("enc")}));
  std::ifstream in(path("dec"));
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), secret);
}

// tpm2_getsessionauditdigest needs three sessions of the tool's loaded: the
// audit session it reads (a handle), and its HMAC sessions for the
// endorsement hierarchy and the signing key. On a TPM with three slots the
// TCTI's cannot join: the command passes through, counted, and the digest is
// the one the tool's audit session accumulated.
TEST_F(TctiTest, SessionAuditDigestWithThreeSessionsOfTheToolsPassesThrough) {
  auto ok = [&](std::vector<std::string> argv, const std::string& extra = "") {
    auto r = tool(argv, tcti(extra));
    EXPECT_EQ(r.exit_code, 0) << argv[0] << ": " << testing::describe(r);
    flush_transients();
    return r.exit_code == 0;
  };
  ASSERT_TRUE(ok({"tpm2_createprimary", "-Q", "-C", "e", "-c", path("prim.ctx")}));
  ASSERT_TRUE(ok({"tpm2_create", "-Q", "-C", path("prim.ctx"), "-u", path("sign.pub"), "-r", path("sign.priv")}));
  ASSERT_TRUE(ok({"tpm2_load", "-Q", "-C", path("prim.ctx"), "-u", path("sign.pub"), "-r", path("sign.priv"), "-c",
                  path("sign.ctx")}));
  ASSERT_TRUE(ok({"tpm2_startauthsession", "-S", path("session.ctx"), "--audit-session"}));
  ASSERT_TRUE(ok({"tpm2_getrandom", "8", "-S", path("session.ctx"), "--cphash", path("cp.hash"), "--rphash",
                  path("rp.hash"), "-o", path("random")}));
  ASSERT_TRUE(ok({"tpm2_getsessionauditdigest", "-c", path("sign.ctx"), "-m", path("att.data"), "-s", path("att.sig"),
                  "-S", path("session.ctx")},
                 ",log=" + path("log")));
  std::string text = slurp(path("log"));
  EXPECT_NE(text.find("GetSessionAuditDigest 0x0000014d wrapped=0 encrypted=0 passed=1"), std::string::npos) << text;
  // The audit digest extends an all-zero digest with H(cpHash || rpHash) (Part 3 §18.5).
  auto read = [&](const std::string& name) {
    std::ifstream in(path(name), std::ios::binary);
    return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  Bytes cp = read("cp.hash"), rp = read("rp.hash"), att = read("att.data");
  ASSERT_EQ(cp.size(), 34u);
  ASSERT_EQ(rp.size(), 34u);
  ASSERT_GE(att.size(), 32u);
  Bytes chained(32, 0);
  chained.insert(chained.end(), cp.begin() + 2, cp.end());
  chained.insert(chained.end(), rp.begin() + 2, rp.end());
  auto expected = crypto::hash(alg::kSha256, {chained});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(Bytes(att.end() - 32, att.end()), *expected);
  ASSERT_TRUE(ok({"tpm2_flushcontext", path("session.ctx")}));
}

// tpm2_createek (5.4) keeps three HMAC sessions of its own loaded, the
// owner's, the endorsement's and the EK's: with the TCTI's session that is
// one more than the TPM's three slots. The TCTI context-saves sessions around
// its own as /dev/tpmrm0 would, and the EK is made under its session.
TEST_F(TctiTest, CreateEkWithThreeSessionsOfItsOwnWorksThroughIt) {
  auto ek = tool({"tpm2_createek", "-c", "0x81010005", "-G", "rsa", "-u", path("ek.pub")}, tcti(",log=" + path("log")));
  ASSERT_EQ(ek.exit_code, 0) << testing::describe(ek);
  std::string text = slurp(path("log"));
  EXPECT_NE(text.find("CreatePrimary 0x00000131 wrapped=1 encrypted=1 passed=0"), std::string::npos) << text;
  EXPECT_NE(text.find("EvictControl 0x00000120 wrapped=1 encrypted=0 passed=0"), std::string::npos) << text;
  auto plain = run_command({"tpm2_readpublic", "-T", direct(), "-c", "0x81010005", "-o", path("plain.pub")});
  ASSERT_EQ(plain.exit_code, 0) << testing::describe(plain);
  EXPECT_EQ(slurp(path("ek.pub")), slurp(path("plain.pub")));
  auto evict = run_command({"tpm2_evictcontrol", "-T", direct(), "-C", "o", "-c", "0x81010005"});
  EXPECT_EQ(evict.exit_code, 0) << testing::describe(evict);
  expect_no_handles_left();
}

// The interposer that owns the salt key (support/attacker.h) answers the
// TCTI's CreatePrimary of the null key with its own key and would recover the
// salt of every session salted to it. The TCTI holds the key to the pinned
// name and refuses to initialize: the tool fails, no session is salted to the
// attacker's key, and the attacker's digest never reaches the PCR.
TEST_F(TctiTest, ASubstitutedSaltKeyIsRefusedAtInit) {
  Bytes digest(32, 0x71);
  auto attacker = owns_the_salt_key();
  ASSERT_TRUE(attacker);
  Bytes before = pcr16();
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + to_hex(digest)}, tcti());
  EXPECT_NE(ext.exit_code, 0) << testing::describe(ext);
  EXPECT_NE(ext.err.find("tpmsec TCTI: "), std::string::npos) << ext.err;
  auto random = tool({"tpm2_getrandom", "--hex", "16"}, tcti());
  EXPECT_NE(random.exit_code, 0) << testing::describe(random);
  EXPECT_EQ(random.out, "") << "bytes vouched for by the attacker's session were printed";
  EXPECT_EQ(attacker->error(), "");
  EXPECT_GT(attacker->counters().keys_substituted, 0u);
  EXPECT_EQ(attacker->counters().salts_recovered, 0u) << "a session was salted to the attacker's key";
  EXPECT_EQ(pcr16(), before);
}

// Once a genuine run kept the null key's context, a later run loads it
// rather than creating one: the attacker, who can substitute only a key the
// TCTI creates, has no key to answer with and recovers no salt. What is left
// to it, rewriting the digest on the bus, the TPM refuses (the session's
// HMAC covers it): the tool fails and the PCR keeps its value.
TEST_F(TctiTest, AKeptNullKeyLeavesTheAttackerNothingToSubstitute) {
  Bytes digest(32, 0x72);
  auto genuine = tool({"tpm2_getrandom", "--hex", "8"}, tcti());
  ASSERT_EQ(genuine.exit_code, 0) << testing::describe(genuine);
  auto attacker = owns_the_salt_key();
  ASSERT_TRUE(attacker);
  Bytes before = pcr16();
  auto ext = tool({"tpm2_pcrextend", "16:sha256=" + to_hex(digest)}, tcti());
  EXPECT_NE(ext.exit_code, 0) << testing::describe(ext);
  EXPECT_EQ(attacker->error(), "");
  EXPECT_EQ(attacker->counters().keys_substituted, 0u);
  EXPECT_EQ(attacker->counters().salts_recovered, 0u);
  EXPECT_GT(attacker->counters().extends_substituted, 0u);
  EXPECT_EQ(pcr16(), before);
}

// tpm2-openssl (Debian's tpm2-openssl, OpenSSL 3's tpm2 provider) through
// the TCTI: its provider opens the TCTI from its own initialization, while
// OpenSSL is still loading providers, so tpmsec's crypto must not depend on
// the program's default library context. Random bytes stay off the bus; a
// key generated and used in the TPM signs what OpenSSL's software verifies.
TEST_F(TctiTest, Tpm2OpensslWorksThroughIt) {
  std::vector<std::string> env = {"TPM2OPENSSL_TCTI=" + tcti()};
  auto rand = run_command({"openssl", "rand", "-provider", "tpm2", "-provider", "default", "-hex", "16"}, env);
  proxy_->wait_idle();
  ASSERT_EQ(rand.exit_code, 0) << testing::describe(rand);
  auto bytes = from_hex(std::string(rand.out.substr(0, 32)));
  ASSERT_TRUE(bytes.ok()) << rand.out;
  EXPECT_FALSE(contains(bus(), *bytes));

  std::ofstream(path("msg")) << "signed in the TPM through tpmsec's TCTI\n";
  auto gen = run_command({"openssl", "genpkey", "-provider", "tpm2", "-provider", "default", "-algorithm", "EC",
                          "-pkeyopt", "group:P-256", "-out", path("key.pem")},
                         env);
  ASSERT_EQ(gen.exit_code, 0) << testing::describe(gen);
  auto pub = run_command({"openssl", "pkey", "-provider", "tpm2", "-provider", "default", "-in", path("key.pem"),
                          "-pubout", "-out", path("pub.pem")},
                         env);
  ASSERT_EQ(pub.exit_code, 0) << testing::describe(pub);
  auto sign = run_command({"openssl", "pkeyutl", "-provider", "tpm2", "-provider", "default", "-sign", "-inkey",
                           path("key.pem"), "-rawin", "-digest", "sha256", "-in", path("msg"), "-out", path("sig")},
                          env);
  ASSERT_EQ(sign.exit_code, 0) << testing::describe(sign);
  auto verify = run_command({"openssl", "pkeyutl", "-verify", "-pubin", "-inkey", path("pub.pem"), "-rawin", "-digest",
                             "sha256", "-in", path("msg"), "-sigfile", path("sig")});
  EXPECT_EQ(verify.exit_code, 0) << testing::describe(verify);
  flush_transients();
}

// Issue 31's attack: the interposer answers the TCTI's own unauthenticated
// name reads (every plain ReadPublic and NV_ReadPublic) with TPM_RC_HANDLE.
// No tool exits 0, Unseal, NV_Read and NV_Write never reach the TPM, and no
// sealed or NV data crosses the bus; the index keeps what it held.
TEST_F(TctiTest, AForgedErrorOnTheNameReadNeverLetsAToolRunWithoutTheSession) {
  const std::string secret = "sealed-secret-for-the-forger-5d1", nv = "nv-data-the-forger-wants-a7c04e";
  const std::string index = "0x1500031";
  std::ofstream(path("secret")) << secret;
  std::ofstream(path("nv")) << nv;
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}, tcti()).exit_code, 0);
  ASSERT_EQ(
      tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("s.pub"), "-r", path("s.priv")},
           tcti())
          .exit_code,
      0);
  flush_transients();
  ASSERT_EQ(tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")},
                 tcti())
                .exit_code,
            0);
  ASSERT_EQ(tool({"tpm2_evictcontrol", "-C", "o", "-c", path("s.ctx"), "0x81010031"}, tcti()).exit_code, 0);
  flush_transients();
  ASSERT_EQ(
      tool({"tpm2_nvdefine", index, "-C", "o", "-s", std::to_string(nv.size()), "-a", "ownerread|ownerwrite"}, tcti())
          .exit_code,
      0);
  ASSERT_EQ(tool({"tpm2_nvwrite", index, "-C", "o", "-i", path("nv")}, tcti()).exit_code, 0);
  take_codes();
  rule_ = [&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    bool plain = c.bytes.size() >= 2 && c.bytes[0] == 0x80 && c.bytes[1] == 0x01;
    if (plain && (c.code == 0x173 || c.code == 0x169)) return testing::Reply::answer(error_frame(0x18B));
    auto r = tpm.transmit(c.bytes);
    return r.ok() ? testing::Reply::answer(*r) : testing::Reply::close();
  };
  auto unseal = tool({"tpm2_unseal", "-c", "0x81010031"}, tcti());
  EXPECT_NE(unseal.exit_code, 0) << testing::describe(unseal);
  EXPECT_EQ(unseal.out.find(secret), std::string::npos);
  // The same object brought back from its context file (the tool's own
  // ContextLoad, whose answer is unauthenticated).
  auto unseal_loaded = tool({"tpm2_unseal", "-c", path("s.ctx")}, tcti());
  EXPECT_NE(unseal_loaded.exit_code, 0) << testing::describe(unseal_loaded);
  EXPECT_EQ(unseal_loaded.out.find(secret), std::string::npos);
  auto read = tool({"tpm2_nvread", index, "-C", "o", "-s", std::to_string(nv.size())}, tcti());
  EXPECT_NE(read.exit_code, 0) << testing::describe(read);
  std::ofstream(path("other")) << std::string(nv.size(), 'X');
  auto write = tool({"tpm2_nvwrite", index, "-C", "o", "-i", path("other")}, tcti());
  EXPECT_NE(write.exit_code, 0) << testing::describe(write);
  for (uint32_t code : take_codes()) {
    EXPECT_NE(code, 0x15Eu) << "Unseal reached the TPM";
    EXPECT_NE(code, 0x14Eu) << "NV_Read reached the TPM";
    EXPECT_NE(code, 0x137u) << "NV_Write reached the TPM";
  }
  rule_ = nullptr;
  auto plain = run_command({"tpm2_nvread", "-T", direct(), index, "-C", "o", "-s", std::to_string(nv.size())});
  EXPECT_EQ(plain.out, nv) << "the index changed";
  EXPECT_FALSE(contains(bus(), as_bytes(secret)));
  EXPECT_FALSE(contains(bus(), as_bytes(nv)));
  run_command({"tpm2_nvundefine", "-T", direct(), index, "-C", "o"});
  run_command({"tpm2_evictcontrol", "-T", direct(), "-C", "o", "-c", "0x81010031"});
  flush_transients();
}

// Issue 31, item 6: a program's own session whose key the TCTI can compute
// (unsalted, unbound, no authValue in it) no longer keeps the sealed secret
// in clear: a policy session satisfied in another process (tpm2-tools keeps
// it in a file), and an HMAC session, each used by tpm2_unseal. The TCTI
// re-signs the program's HMAC over the encrypted parameters.
TEST_F(TctiTest, UnsealUnderTheProgramsOwnPolicyOrHmacSessionKeepsTheSecretOffTheBus) {
  const std::string secret = "policy-sealed-secret-0b8e21f4";
  std::ofstream(path("secret")) << secret;
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}, tcti()).exit_code, 0);
  auto policy = tool({"tpm2_createpolicy", "--policy-pcr", "-l", "sha256:0", "-L", path("pcr.policy")}, tcti());
  ASSERT_EQ(policy.exit_code, 0) << testing::describe(policy);
  // tpm2-tools leaves its trial session loaded on a TPM without a resource
  // manager, with or without the TCTI.
  run_command({"tpm2_flushcontext", "-T", direct(), "-l"});
  for (const char* kind : {"policy", "hmac"}) {
    std::vector<std::string> create = {"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u",
                                       path("s.pub"), "-r", path("s.priv")};
    if (std::string(kind) == "policy") create.insert(create.end(), {"-L", path("pcr.policy")});
    flush_transients();
    ASSERT_EQ(tool(create, tcti()).exit_code, 0) << kind;
    flush_transients();
    ASSERT_EQ(
        tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")},
             tcti())
            .exit_code,
        0)
        << kind;
    flush_transients();
    auto start =
        tool({"tpm2_startauthsession", std::string("--") + kind + "-session", "-S", path("session.ctx")}, tcti());
    ASSERT_EQ(start.exit_code, 0) << testing::describe(start);
    if (std::string(kind) == "policy") {
      auto pcr = tool({"tpm2_policypcr", "-S", path("session.ctx"), "-l", "sha256:0"}, tcti());
      ASSERT_EQ(pcr.exit_code, 0) << testing::describe(pcr);
    }
    auto unseal = tool({"tpm2_unseal", "-p", "session:" + path("session.ctx"), "-c", path("s.ctx")},
                       tcti(",log=" + path(std::string(kind) + ".log")));
    ASSERT_EQ(unseal.exit_code, 0) << testing::describe(unseal);
    EXPECT_EQ(unseal.out, secret) << kind;
    std::string log = slurp(path(std::string(kind) + ".log"));
    EXPECT_NE(log.find("Unseal 0x0000015e wrapped=1 encrypted=1"), std::string::npos) << kind << "\n" << log;
    run_command({"tpm2_flushcontext", "-T", direct(), path("session.ctx")});
  }
  flush_transients();
  expect_no_handles_left();
  EXPECT_FALSE(contains(bus(), as_bytes(secret)));
}

// clevis's tpm2 pin (tpm2-tools underneath, a PCR policy session of its own
// in the decrypting process, unsalted and unbound) through the TCTI: the key
// it unseals (a JWK) never crosses the bus. Sealed straight to the TPM: on a
// TPM without a resource manager its tpm2_createpolicy leaves a trial
// session loaded, with or without the TCTI.
TEST_F(TctiTest, ClevisTpm2PinBoundToAPcrDecryptsWithoutItsKeyOnTheBus) {
  const std::string secret = "clevis-protected-secret-7e20";
  flush_transients();
  auto enc = run_command({"clevis", "encrypt", "tpm2", R"({"pcr_bank":"sha256","pcr_ids":"7"})"},
                         {"TPM2TOOLS_TCTI=" + direct()}, &secret);
  ASSERT_EQ(enc.exit_code, 0) << testing::describe(enc);
  run_command({"tpm2_flushcontext", "-T", direct(), "-l"});
  flush_transients();
  auto dec = run_command({"clevis", "decrypt"}, {"TPM2TOOLS_TCTI=" + tcti(",log=" + path("log"))}, &enc.out);
  proxy_->wait_idle();
  ASSERT_EQ(dec.exit_code, 0) << testing::describe(dec);
  EXPECT_EQ(dec.out, secret);
  std::string log = slurp(path("log"));
  EXPECT_NE(log.find("Unseal 0x0000015e wrapped=1 encrypted=1"), std::string::npos) << log;
  // The unsealed JWK's members, and the secret it decrypts.
  EXPECT_FALSE(contains(bus(), as_bytes(std::string_view("\"kty\""))));
  EXPECT_FALSE(contains(bus(), as_bytes(std::string_view("key_ops"))));
  EXPECT_FALSE(contains(bus(), as_bytes(secret)));
  run_command({"tpm2_flushcontext", "-T", direct(), "-l"});
  flush_transients();
}

// strict: the Unseal whose data cannot be encrypted (the tool HMACs with the
// object's password, which the TCTI never sees) is refused with one line,
// and nothing of it is sent. Without strict it goes out audited.
TEST_F(TctiTest, StrictRefusesAnUnsealItCannotEncryptWithOneLine) {
  const std::string secret = "password-sealed-secret-52c1", password = "object-password-e4";
  std::ofstream(path("secret")) << secret;
  flush_transients();
  ASSERT_EQ(tool({"tpm2_createprimary", "-C", "o", "-c", path("prim.ctx")}, tcti()).exit_code, 0);
  flush_transients();
  ASSERT_EQ(tool({"tpm2_create", "-C", path("prim.ctx"), "-i", path("secret"), "-u", path("s.pub"), "-r",
                  path("s.priv"), "-p", password},
                 tcti())
                .exit_code,
            0);
  flush_transients();
  ASSERT_EQ(tool({"tpm2_load", "-C", path("prim.ctx"), "-u", path("s.pub"), "-r", path("s.priv"), "-c", path("s.ctx")},
                 tcti())
                .exit_code,
            0);
  flush_transients();
  take_codes();
  auto refused = tool({"tpm2_unseal", "-c", path("s.ctx"), "-p", password}, tcti(",strict"));
  EXPECT_NE(refused.exit_code, 0) << testing::describe(refused);
  EXPECT_NE(refused.err.find("tpmsec TCTI: strict: Unseal refused, not sent"), std::string::npos) << refused.err;
  for (uint32_t code : take_codes()) EXPECT_NE(code, 0x15Eu) << "Unseal reached the TPM";
  EXPECT_FALSE(contains(bus(), as_bytes(secret)));
  auto allowed = tool({"tpm2_unseal", "-c", path("s.ctx"), "-p", password}, tcti());
  EXPECT_EQ(allowed.exit_code, 0) << testing::describe(allowed);
  EXPECT_EQ(allowed.out, secret);
  // What strict allows: everything it can protect.
  auto random = tool({"tpm2_getrandom", "--hex", "8"}, tcti(",strict"));
  EXPECT_EQ(random.exit_code, 0) << testing::describe(random);
  flush_transients();
}

// What the TCTI keeps between runs, where another user could have written
// it: root's TPMSEC_STATE_DIR in a 0777 directory of nobody's (the state
// root could be swapped), or a kept command count loosened to 0644. The
// TCTI refuses to initialize (the tool fails, one "tpmsec TCTI:" line
// naming the path and its owner) rather than use the state or silently
// ignore it; put right, the next run works.
TEST_F(TctiTest, StateAnotherUserCouldHaveWrittenFailsInit) {
  namespace fs = std::filesystem;
  ASSERT_EQ(::geteuid(), 0u) << "this test plants files owned by another uid (chown): run it as root";
  const std::string shared = path("shared");
  fs::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chown(shared.c_str(), 65534, 65534), 0);
  auto run = [&](const std::string& state) {
    auto r = run_command({"tpm2_getrandom", "-T", tcti(), "--hex", "8"}, {"TPMSEC_STATE_DIR=" + state});
    proxy_->wait_idle();
    return r;
  };
  auto swapped = run(shared + "/state");
  EXPECT_NE(swapped.exit_code, 0) << testing::describe(swapped);
  EXPECT_EQ(swapped.out, "");
  EXPECT_NE(swapped.err.find("tpmsec TCTI: the state directory's parent " + shared +
                             " (owner uid 65534 (nobody), mode 0777) belongs to neither root nor this user: refused\n"),
            std::string::npos)
      << swapped.err;
  EXPECT_TRUE(fs::is_empty(shared)) << "written in another user's directory";

  const std::string own = path("own");
  auto first = run(own);
  ASSERT_EQ(first.exit_code, 0) << testing::describe(first);
  std::string count;
  for (const auto& e : fs::directory_iterator(own + "/session-cache")) {
    if (e.path().filename().string().find("-commands-") != std::string::npos) count = e.path().string();
  }
  ASSERT_FALSE(count.empty()) << "no command count kept";
  ASSERT_EQ(::chmod(count.c_str(), 0644), 0);
  auto loosened = run(own);
  EXPECT_NE(loosened.exit_code, 0) << testing::describe(loosened);
  EXPECT_NE(loosened.err.find("tpmsec TCTI: state file " + count +
                              " (owner uid 0 (root), mode 0644) is not mode 0600 or stricter: refused\n"),
            std::string::npos)
      << loosened.err;
  ASSERT_EQ(::chmod(count.c_str(), 0600), 0);
  auto again = run(own);
  EXPECT_EQ(again.exit_code, 0) << testing::describe(again);
}

TEST_F(TctiTest, NoAnchorOnABusRefusesToInitializeAndNamesTheOptions) {
  std::string no_anchor =
      std::string(TPMSEC_TCTI_PATH) + ":swtpm:host=127.0.0.1,port=" + std::to_string(proxy_->port());
  auto r = tool({"tpm2_getrandom", "--hex", "8"}, no_anchor);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("null-name="), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ek-ca="), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tofu"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tpmsec
