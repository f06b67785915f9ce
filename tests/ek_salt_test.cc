// --ek-ca against a real swtpm as a manufacturer ships it: provisioned by
// swtpm_setup with EK certificates from a local CA in the test's temporary
// directory (support/ek_provisioning.h), plus the ECC P-256 EK certificate
// swtpm_setup 0.7 does not make. The CLI is run straight at swtpm or
// through the interposer (support/interposer.h); PCR 16 and the handles
// left are read straight from swtpm.
//
// Outcomes:
//   genuine EK, the right CA (directory, or the intermediate alone): exit 0, PCR extended
//   EK certificate from another CA: exit 3, PCR unchanged
//   no EK certificate at the index: a clear error naming it and the other anchors
//   CreatePrimary(ENDORSEMENT) answered with another key (ECC, RSA): exit 3, PCR unchanged
//   the genuine EK's name, but StartAuthSession's key handle swapped: exit 3, PCR unchanged
//   a TPM Reset between sessions: the EK is created again, same name, sessions work
//
// One provisioned swtpm for the suite (stopped by PID), a fresh interposer
// per test; nothing depends on timing.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/attacker.h"
#include "support/ek_provisioning.h"
#include "support/direct_tpm.h"
#include "support/interposer.h"
#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/tpm_frames.h"
#include "tpmsec/commands.h"
#include "tpmsec/ek_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/response_code.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"

namespace tpmsec::testing {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kPcr = 16;



class EkSaltTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    if (!have_swtpm_setup()) {
      *skip_ = "swtpm, swtpm_setup, swtpm_localca or swtpm_cert is not installed (apt-get install swtpm swtpm-tools)";
      return;
    }
    char tmpl[] = "/tmp/tpmsec-ek-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      *failure_ = "mkdtemp failed";
      return;
    }
    *work_ = tmpl;
    for (const char* name : {"genuine", "other"}) fs::create_directories(fs::path(*work_) / name);
    auto genuine = provision_tpm((fs::path(*work_) / "genuine").string());
    // A second manufacturer: only its CA is used, as the wrong trust anchor.
    auto other = provision_tpm((fs::path(*work_) / "other").string());
    if (!genuine.ok() || !other.ok()) {
      *failure_ = "swtpm_setup: " + (genuine.ok() ? other.error() : genuine.error()).message();
      return;
    }
    *genuine_ = *genuine;
    *other_ = *other;
    swtpm_->use_state_dir(genuine_->state_dir);
    if (!swtpm_->start()) {
      *failure_ = swtpm_->error();
      return;
    }
    Direct d(swtpm_->spec());
    if (!d.ok()) return;
    Status added = add_ecc_p256_ek_certificate(d.tpm(), *genuine_, *work_);
    if (!added.ok()) *failure_ = "adding the ECC P-256 EK certificate: " + added.error().message();
  }
  static void TearDownTestSuite() {
    swtpm_->stop();  // by PID
    if (!work_->empty()) fs::remove_all(*work_);
  }

 protected:
  void SetUp() override {
    if (!skip_->empty()) GTEST_SKIP() << *skip_;
    ASSERT_EQ(*failure_, "");
    proxy_ = std::make_unique<Interposer>(swtpm_->port());
    ASSERT_TRUE(proxy_->start().ok());
  }
  void TearDown() override {
    if (proxy_) proxy_->stop();
    if (swtpm_->running()) {
      Direct d(swtpm_->spec());
      if (d.ok()) {
        for (uint32_t h : list_handles(d.tpm())) (void)d.tpm().run(cmd::FlushContext{h});
      }
    }
  }

  void expect_no_handles(const std::string& what) {
    Direct d(swtpm_->spec());
    if (!d.ok()) return;
    std::vector<uint32_t> left = list_handles(d.tpm());
    EXPECT_TRUE(left.empty()) << what << ": " << left.size() << " handles left loaded";
    for (uint32_t h : left) (void)d.tpm().run(cmd::FlushContext{h});
  }
  std::string pcr() {
    Direct d(swtpm_->spec());
    if (!d.ok()) return "";
    auto rsp = d.tpm().run(cmd::PcrRead{PcrSelectionList{{PcrSelection::single(alg::kSha256, kPcr)}}});
    EXPECT_TRUE(rsp.ok()) << rsp.error().message();
    if (!rsp.ok() || rsp->pcr_values.digests.size() != 1) return "";
    return to_hex(rsp->pcr_values.digests[0]);
  }

  static std::vector<std::string> extend_args(std::vector<std::string> more) {
    std::vector<std::string> args{"pcr", "extend", "16", to_hex(client_digest())};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }
  // The CLI straight at swtpm.
  CommandResult direct(std::vector<std::string> args) {
    args.insert(args.end(), {"--tpm", swtpm_->spec()});
    return run_tpmsec(args);
  }
  // The CLI through the interposer; returns once its connection is closed.
  CommandResult through_proxy(std::vector<std::string> args) {
    args.insert(args.end(), {"--tpm", proxy_->spec()});
    CommandResult r = run_tpmsec(args);
    proxy_->wait_idle();
    return r;
  }

  static SwtpmProcess* swtpm_;
  static std::string* work_;
  static std::string* skip_;
  static std::string* failure_;
  static ProvisionedTpm* genuine_;
  static ProvisionedTpm* other_;
  std::unique_ptr<Interposer> proxy_;
};

SwtpmProcess* EkSaltTest::swtpm_ = new SwtpmProcess();
std::string* EkSaltTest::work_ = new std::string();
std::string* EkSaltTest::skip_ = new std::string();
std::string* EkSaltTest::failure_ = new std::string();
ProvisionedTpm* EkSaltTest::genuine_ = new ProvisionedTpm();
ProvisionedTpm* EkSaltTest::other_ = new ProvisionedTpm();

// ---- The genuine TPM ----

TEST_F(EkSaltTest, GenuineEkAndTheRightCaExtend) {
  struct Case {
    std::string what;
    std::vector<std::string> options;
  };
  std::vector<Case> cases{
      {"auto salt: the ECC EK", {"--ek-ca", genuine_->trust_dir}},
      {"--salt ecc", {"--ek-ca", genuine_->trust_dir, "--salt", "ecc"}},
      {"--salt rsa", {"--ek-ca", genuine_->trust_dir, "--salt", "rsa"}},
      // The intermediate alone is an anchor (X509_V_FLAG_PARTIAL_CHAIN).
      {"the intermediate as a file", {"--ek-ca", genuine_->issuer_cert}},
  };
  // Through the interposer, passing everything, to see where the salt key
  // comes from: the endorsement hierarchy, never the null one.
  std::vector<uint32_t> hierarchies;
  size_t nv_reads = 0;
  proxy_->set_rule([&](const ProxiedCommand& c, Upstream& tpm) {
    auto f = parse_command(c.bytes);
    if (f.ok() && f->code == cmd::CreatePrimary::kInfo.code) hierarchies.push_back(f->handles[0]);
    if (f.ok() && f->code == cmd::NvRead::kInfo.code) ++nv_reads;
    return pass(c, tpm);
  });
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    hierarchies.clear();
    std::string before = pcr();
    auto r = through_proxy(extend_args(c.options));
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(pcr(), extended_hex(before, client_digest()));
    EXPECT_EQ(hierarchies, std::vector<uint32_t>{rh::kEndorsement});
    expect_no_handles(c.what);
  }
  EXPECT_GE(nv_reads, cases.size());
  // Parameter encryption through an EK-salted session (and its cipher check).
  auto random = direct({"random", "16", "--ek-ca", genuine_->trust_dir});
  EXPECT_EQ(random.exit_code, 0) << describe(random);
  EXPECT_EQ(random.out.size(), 33u) << describe(random);
  expect_no_handles("random");
}

// The library: the EK's name is the certified key's, and after a TPM Reset
// (the saved context no longer loads) the EK is created again with the
// same name, so sessions keep working.
TEST_F(EkSaltTest, SurvivesATpmReset) {
  Direct d(swtpm_->spec());
  ASSERT_TRUE(d.ok());
  ProtectionConfig config;
  config.ek_ca = genuine_->trust_dir;
  auto factory = SessionFactory::create(d.tpm(), config);
  ASSERT_TRUE(factory.ok()) << factory.error().message();
  ASSERT_NE((*factory)->ek_key(), nullptr);
  EXPECT_EQ((*factory)->null_key(), nullptr);
  EXPECT_EQ((*factory)->ek_key()->kind(), SaltKind::kEcc);
  Bytes name = (*factory)->ek_key()->name();
  auto first = (*factory)->start(attr::kContinueSession);
  ASSERT_TRUE(first.ok()) << first.error().message();
  first->reset();
  ASSERT_TRUE(d.transport().reset_tpm().ok());
  auto second = (*factory)->start(attr::kContinueSession);
  ASSERT_TRUE(second.ok()) << second.error().message();
  EXPECT_EQ((*factory)->ek_key()->name(), name);
  // And the session works: an HMAC-protected extend.
  std::string before = to_hex(pcr_read(d.tpm(), alg::kSha256, kPcr).value());
  cmd::PcrExtend extend{NamedHandle::of(kPcr), DigestValues{{TaggedHash{alg::kSha256, client_digest()}}}};
  auto done = d.tpm().run(extend, {Auth{second->get(), {}}});
  EXPECT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(to_hex(pcr_read(d.tpm(), alg::kSha256, kPcr).value()), extended_hex(before, client_digest()));
}

// ---- Refusals ----

// Exit 3, not 1: the certificate is there and well formed, it just is not
// vouched for by the CA the operator trusts. That is the failure this anchor
// exists to detect (another TPM, or a certificate planted on the bus), an
// integrity failure like a pinned null-key name that differs.
TEST_F(EkSaltTest, CertificateFromAnotherCaIsAnIntegrityFailure) {
  for (std::string salt : {"auto", "rsa"}) {
    SCOPED_TRACE(salt);
    std::string before = pcr();
    auto r = direct(extend_args({"--ek-ca", other_->trust_dir, "--salt", salt}));
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_NE(r.err.find("does not verify"), std::string::npos) << describe(r);
    EXPECT_EQ(pcr(), before);
    expect_no_handles("another CA");
  }
}

TEST_F(EkSaltTest, MissingCaBundleIsAUsageError) {
  auto r = direct(extend_args({"--ek-ca", *work_ + "/no-such-ca.pem"}));
  EXPECT_EQ(r.exit_code, kExitUsage) << describe(r);
}

// A TPM without EK certificates (a fresh swtpm): the error names the index
// and the anchors that remain.
TEST_F(EkSaltTest, NoCertificateAtTheIndexSaysSo) {
  SwtpmProcess bare;
  ASSERT_TRUE(bare.start()) << bare.error();
  auto r = run_tpmsec(extend_args({"--ek-ca", genuine_->trust_dir, "--salt", "rsa", "--tpm", bare.spec()}));
  EXPECT_NE(r.exit_code, 0) << describe(r);
  for (const char* s : {"0x01c00002", "--null-name", "--tofu"}) {
    EXPECT_NE(r.err.find(s), std::string::npos) << "the error does not name " << s << ": " << describe(r);
  }
  auto any = run_tpmsec(extend_args({"--ek-ca", genuine_->trust_dir, "--tpm", bare.spec()}));
  EXPECT_NE(any.exit_code, 0) << describe(any);
  EXPECT_NE(any.err.find("0x01c0000a"), std::string::npos) << describe(any);
}

// ---- An active interposer ----

// CreatePrimary(TPM_RH_ENDORSEMENT) answered by an attacker owning its own
// P-256 key (the EK template, the attacker's point, a matching name).
TEST_F(EkSaltTest, SubstitutedEccEkIsRefused) {
  AttackerOptions options{attacker_digest()};
  options.hierarchy = rh::kEndorsement;
  auto attacker = NullKeyAttacker::create(options);
  ASSERT_TRUE(attacker.ok()) << attacker.error().message();
  proxy_->set_rule((*attacker)->rule());
  for (std::vector<std::string> args : {extend_args({"--ek-ca", genuine_->trust_dir}),
                                        std::vector<std::string>{"random", "16", "--ek-ca", genuine_->trust_dir}}) {
    SCOPED_TRACE(args[0]);
    std::string before = pcr();
    auto r = through_proxy(args);
    EXPECT_EQ((*attacker)->error(), "");
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(pcr(), before);
    expect_no_handles("substituted ECC EK");
  }
  EXPECT_GT((*attacker)->counters().keys_substituted, 0u);
  EXPECT_EQ((*attacker)->counters().salts_recovered, 0u) << "a session was salted to the attacker's key";
}

// The RSA EK: the interposer rewrites the TPM's CreatePrimary response to
// carry another modulus (its own key) and that area's name.
TEST_F(EkSaltTest, SubstitutedRsaEkIsRefused) {
  size_t rewritten = 0;
  proxy_->set_rule([&rewritten](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    Reply r = pass(c, tpm);
    auto cmd_frame = parse_command(c.bytes);
    if (c.code != cmd::CreatePrimary::kInfo.code || !r.response || !cmd_frame.ok() ||
        cmd_frame->handles[0] != rh::kEndorsement) {
      return r;
    }
    auto f = parse_response(*r.response, c.code);
    if (!f.ok() || f->code != rc::kSuccess) return r;
    cmd::CreatePrimary::Response rsp;
    Reader reader(f->parameters);
    unmarshal_all(reader, rsp.params());
    if (!reader.ok()) return r;
    Public& pub = rsp.out_public.public_area;
    pub.unique_x.back() ^= 0x02;  // another (odd) modulus: the attacker's
    rsp.name.bytes = compute_name(pub).value();
    Writer w;
    marshal_all(w, rsp.params());
    f->parameters = w.finish().value();
    ++rewritten;
    return Reply::answer(build_response(*f));
  });
  std::string before = pcr();
  auto r = through_proxy(extend_args({"--ek-ca", genuine_->trust_dir, "--salt", "rsa"}));
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  EXPECT_NE(r.err.find("certifies"), std::string::npos) << describe(r);
  EXPECT_GT(rewritten, 0u);
  EXPECT_EQ(pcr(), before);
  expect_no_handles("substituted RSA EK");
}

// A salt key not proven by the EK: CreatePrimary goes through untouched (the
// genuine EK, the right name), but StartAuthSession is sent with the handle
// of another P-256 key the interposer loaded. The TPM derives the salt with
// that key: its session key is not the client's, it refuses the first HMAC,
// and a session none of whose responses verified being refused is tampering
// (src/tpm/tpm.cc): exit 3.
TEST_F(EkSaltTest, SwappedSaltKeyHandleIsRefused) {
  size_t swapped = 0;
  proxy_->set_rule([&swapped](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (c.code != cmd::StartAuthSession::kInfo.code) return pass(c, tpm);
    auto f = parse_command(c.bytes);
    if (!f.ok() || f->handles[0] == rh::kNull) return pass(c, tpm);
    // The decoy: a P-256 primary of the null hierarchy, created for this session.
    CommandFrame create;
    create.code = cmd::CreatePrimary::kInfo.code;
    create.handles = {rh::kNull};
    SessionEntry pw;
    pw.handle = rh::kPasswordSession;
    pw.attributes = attr::kContinueSession;
    create.sessions.push_back(pw);
    Writer w;
    cmd::CreatePrimary params;
    params.in_public.public_area = null_key_template(SaltKind::kEcc);
    marshal_all(w, params.params());
    create.parameters = w.finish().value();
    auto created = tpm.transmit(build_command(create));
    if (!created.ok()) return Reply::close();
    auto decoy = parse_response(*created, create.code);
    if (!decoy.ok() || decoy->code != rc::kSuccess) return Reply::close();
    f->handles[0] = decoy->handles[0];
    auto rsp = tpm.transmit(build_command(*f));
    CommandFrame flush;
    flush.code = cmd::FlushContext::kInfo.code;
    flush.parameters = be32(decoy->handles[0]);
    (void)tpm.transmit(build_command(flush));
    ++swapped;
    return rsp.ok() ? Reply::answer(*rsp) : Reply::close();
  });
  for (std::vector<std::string> args : {extend_args({"--ek-ca", genuine_->trust_dir}),
                                        std::vector<std::string>{"random", "16", "--ek-ca", genuine_->trust_dir}}) {
    SCOPED_TRACE(args[0]);
    std::string before = pcr();
    auto r = through_proxy(args);
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(pcr(), before);
    expect_no_handles("swapped salt key");
  }
  EXPECT_GT(swapped, 0u);
}

}  // namespace
}  // namespace tpmsec::testing
