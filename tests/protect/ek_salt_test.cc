// --ek-ca against a real swtpm as a manufacturer ships it: provisioned by
// swtpm_setup with EK certificates from a local CA in the test's temporary
// directory (support/ek_provisioning.h), plus the ECC P-256 EK certificate
// swtpm_setup 0.7 does not make. The CLI is run straight at swtpm or
// through the interposer (support/interposer.h); PCR 16 and the handles
// left are read straight from swtpm.
//
// Outcomes:
//   genuine EK, the right CA (root and intermediate): exit 0, PCR extended
//   EK certificate from another CA, or a bundle of the intermediate alone: exit 3, PCR unchanged
//   a certificate of the right CA that is not an EK certificate (a TLS
//     server's, a CA's) or chains to a leaf filed in the bundle, certifying
//     the interposer's key: exit 3, PCR unchanged (issue 21)
//   a relay to another genuine TPM of the same CA (the twin): exit 3 once
//     the EK is pinned, and on first use with the kernel's null-key pin
//   no EK certificate at the index: a clear error naming it and the other anchors
//   CreatePrimary(ENDORSEMENT) answered with another key (ECC, RSA): exit 3, PCR unchanged
//   the genuine EK's name, but StartAuthSession's key handle swapped: exit 3, PCR unchanged
//   a TPM Reset between sessions: the EK is created again, same name, sessions work
//
// Two provisioned swtpms for the suite (stopped by PID): the genuine one and
// its twin, certified by the same CA; a fresh interposer per test; nothing
// depends on timing.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "support/attacker.h"
#include "support/direct_tpm.h"
#include "support/ek_provisioning.h"
#include "support/interposer.h"
#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/test_tpm.h"
#include "support/tpm_frames.h"
#include "tpmsec/commands.h"
#include "tpmsec/ek_key.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/pcr.h"
#include "tpmsec/response_code.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec::testing {
namespace {

namespace fs = std::filesystem;

// The CA bundle the genuine TPM's EK certificate chains to, as the protect
// layer reads it for --ek-ca.
std::shared_ptr<const crypto::CaBundle> ca_bundle(const std::string& dir) {
  auto bundle = load_ca_bundle(dir, FileHostState());
  EXPECT_TRUE(bundle.ok()) << bundle.error().message();
  return bundle.ok() ? std::make_shared<const crypto::CaBundle>(std::move(*bundle)) : nullptr;
}

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
    for (const char* name : {"genuine", "other", "twin"}) fs::create_directories(fs::path(*work_) / name);
    auto genuine = provision_tpm((fs::path(*work_) / "genuine").string());
    // A second manufacturer: only its CA is used, as the wrong trust anchor.
    auto other = provision_tpm((fs::path(*work_) / "other").string());
    if (!genuine.ok() || !other.ok()) {
      *failure_ = "swtpm_setup: " + (genuine.ok() ? other.error() : genuine.error()).message();
      return;
    }
    *genuine_ = *genuine;
    *other_ = *other;
    // Another genuine TPM of the same manufacturer: what a relay reaches.
    auto twin = provision_tpm((fs::path(*work_) / "twin").string(), genuine_);
    if (!twin.ok()) {
      *failure_ = "swtpm_setup (twin): " + twin.error().message();
      return;
    }
    *twin_ = *twin;
    for (auto [process, tpm] : {std::pair{swtpm_, genuine_}, std::pair{twin_swtpm_, twin_}}) {
      process->use_state_dir(tpm->state_dir);
      if (!process->start()) {
        *failure_ = process->error();
        return;
      }
      Direct d(process->spec());
      if (!d.ok()) return;
      Status added = add_ecc_p256_ek_certificate(d.tpm(), *genuine_, (fs::path(tpm->state_dir).parent_path()).string());
      if (!added.ok()) {
        *failure_ = "adding the ECC P-256 EK certificate: " + added.error().message();
        return;
      }
    }
  }
  static void TearDownTestSuite() {
    swtpm_->stop();  // by PID
    twin_swtpm_->stop();
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
    for (SwtpmProcess* process : {swtpm_, twin_swtpm_}) {
      if (!process->running()) continue;
      Direct d(process->spec());
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
  std::string pcr(SwtpmProcess* process = swtpm_) {
    Direct d(process->spec());
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
  CommandResult through_proxy(std::vector<std::string> args, const std::vector<std::string>& env = {}) {
    args.insert(args.end(), {"--tpm", proxy_->spec()});
    CommandResult r = run_tpmsec(args, env);
    proxy_->wait_idle();
    return r;
  }
  // A state directory of the test's own (pins start empty).
  std::vector<std::string> fresh_state() {
    std::string dir = *work_ + "/state-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    return {"TPMSEC_STATE_DIR=" + dir, "TPMSEC_BOOT_ID=boot-1"};
  }
  // A rule that relays every command to the twin (its own connection,
  // opened at the first command; `twin` closes it).
  static Rule relay_to_twin(std::unique_ptr<Direct>& twin, size_t& relayed) {
    return [&twin, &relayed](const ProxiedCommand& c, Upstream&) -> Reply {
      if (!twin) twin = std::make_unique<Direct>(twin_swtpm_->spec());
      if (!twin->ok()) return Reply::close();
      auto rsp = twin->transport().transmit(c.bytes);
      ++relayed;
      return rsp.ok() ? Reply::answer(*rsp) : Reply::close();
    };
  }

  static SwtpmProcess* swtpm_;
  static SwtpmProcess* twin_swtpm_;
  static std::string* work_;
  static std::string* skip_;
  static std::string* failure_;
  static ProvisionedTpm* genuine_;
  static ProvisionedTpm* other_;
  static ProvisionedTpm* twin_;
  std::unique_ptr<Interposer> proxy_;
};

SwtpmProcess* EkSaltTest::swtpm_ = new SwtpmProcess();
SwtpmProcess* EkSaltTest::twin_swtpm_ = new SwtpmProcess();
std::string* EkSaltTest::work_ = new std::string();
std::string* EkSaltTest::skip_ = new std::string();
std::string* EkSaltTest::failure_ = new std::string();
ProvisionedTpm* EkSaltTest::genuine_ = new ProvisionedTpm();
ProvisionedTpm* EkSaltTest::other_ = new ProvisionedTpm();
ProvisionedTpm* EkSaltTest::twin_ = new ProvisionedTpm();

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
  };
  // Through the interposer, passing everything, to see where the salt key
  // comes from: the endorsement hierarchy, never the null one.
  std::vector<uint32_t> hierarchies;
  size_t nv_reads = 0;
  proxy_->set_rule([&](const ProxiedCommand& c, Upstream& tpm) {
    auto f = parse_command(c.bytes);
    if (f.ok() && f->code == cc::kCreatePrimary) hierarchies.push_back(f->handles[0]);
    if (f.ok() && f->code == cc::kNvRead) ++nv_reads;
    return pass(c, tpm);
  });
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    hierarchies.clear();
    std::string before = pcr();
    // A state directory of its own: each case is a first use (no EK pinned).
    auto r = through_proxy(extend_args(c.options), fresh_state());
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
  config.ek_ca = ca_bundle(genuine_->trust_dir);
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
    if (c.code != cc::kCreatePrimary || !r.response || !cmd_frame.ok() || cmd_frame->handles[0] != rh::kEndorsement) {
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
    if (c.code != cc::kStartAuthSession) return pass(c, tpm);
    auto f = parse_command(c.bytes);
    if (!f.ok() || f->handles[0] == rh::kNull) return pass(c, tpm);
    // The decoy: a P-256 primary of the null hierarchy, created for this session.
    CommandFrame create;
    create.code = cc::kCreatePrimary;
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
    flush.code = cc::kFlushContext;
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

// The operator's bundle holds the manufacturer's intermediate but not its
// root: no partial chains, so nothing anchors the EK certificate (issue 21).
TEST_F(EkSaltTest, TheIntermediateAloneIsNoAnchor) {
  std::string before = pcr();
  auto r = direct(extend_args({"--ek-ca", genuine_->issuer_cert}));
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  EXPECT_NE(r.err.find("does not verify"), std::string::npos) << describe(r);
  EXPECT_EQ(pcr(), before);
  expect_no_handles("intermediate alone");
}

// ---- Certificates that are not EK certificates (issue 21) ----

// Each certificate certifies the interposer's own P-256 key; the interposer
// serves it as the TPM's ECC EK certificate (NV_ReadPublic and NV_Read of
// 0x01C0000A) and plays that EK (NullKeyAttacker on the endorsement
// hierarchy): accepted, it would recover every salt and extend its own
// digest. The control shows it would: an EK certificate the trusted CA
// issued for the attacker's key wins (that is the CA's own compromise, which
// no client check can catch). Everything else is refused before a session
// is salted: exit 3, PCR unchanged.
TEST_F(EkSaltTest, CertificatesThatAreNotEkCertificatesAreRefused) {
  const std::vector<std::string> p256{"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"};
  std::string dir = *work_ + "/planted";
  fs::create_directories(dir);
  AttackerOptions options{attacker_digest()};
  options.hierarchy = rh::kEndorsement;
  // The attacker's own CA, whose EK-style leaf ends up filed in the bundle.
  auto rogue = make_key(dir, "rogue-ca", p256);
  ASSERT_TRUE(rogue.ok()) << rogue.error().message();
  CertificateSpec rogue_ca{"rogue-ca", "", "", rogue->private_key, true, "keyCertSign, cRLSign", ""};
  auto rogue_cert = issue_certificate(dir, rogue_ca);
  ASSERT_TRUE(rogue_cert.ok()) << rogue_cert.error().message();

  struct Case {
    std::string what;
    CertificateSpec spec;  // public_key: the attacker's, filled in below
    bool leaf_in_bundle = false;
    const char* refusal = nullptr;  // nullptr: the control, accepted
  };
  CertificateSpec trusted{"", "", genuine_->issuer_cert, genuine_->signing_key};
  std::vector<Case> cases;
  CertificateSpec tls = trusted;
  tls.name = "tls-server";
  tls.key_usage = "digitalSignature, keyAgreement";
  tls.extended_key_usage = "serverAuth";
  cases.push_back({"a TLS server certificate of the trusted CA", tls, false, "tcg-kp-EKCertificate"});
  CertificateSpec ca = trusted;
  ca.name = "ca-with-ek-eku";
  ca.ca = true;
  ca.key_usage = "keyCertSign, keyAgreement";
  cases.push_back({"a CA certificate with the EK usage", ca, false, "CA certificate"});
  CertificateSpec leaf{"filed-leaf", "", rogue_cert->pem, rogue->private_key};
  cases.push_back({"an EK certificate filed in the bundle as its own anchor", leaf, true, "does not verify"});
  CertificateSpec control = trusted;
  control.name = "control-ek";
  cases.push_back({"control: an EK certificate of the trusted CA", control, false, nullptr});

  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto attacker = NullKeyAttacker::create(options);
    ASSERT_TRUE(attacker.ok()) << attacker.error().message();
    auto key = ecc_p256_public_key_file(dir, "attacker-" + c.spec.name, (*attacker)->public_area());
    ASSERT_TRUE(key.ok()) << key.error().message();
    c.spec.public_key = *key;
    auto cert = issue_certificate(dir, c.spec);
    ASSERT_TRUE(cert.ok()) << cert.error().message();
    std::string bundle = genuine_->trust_dir;
    if (c.leaf_in_bundle) {
      bundle = dir + "/bundle-with-leaf";
      fs::create_directories(bundle);
      fs::copy(genuine_->trust_dir, bundle, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
      fs::copy_file(cert->pem, bundle + "/filed-leaf.pem", fs::copy_options::overwrite_existing);
    }
    size_t served = 0;
    proxy_->set_rule(serve_ek_certificate(kEkCertIndexEccP256, cert->der, (*attacker)->rule(), &served));
    std::string before = pcr();
    auto r = through_proxy(extend_args({"--ek-ca", bundle}), fresh_state());
    EXPECT_GT(served, 0u) << "the planted certificate was not read";
    EXPECT_EQ((*attacker)->error(), "");
    if (c.refusal) {
      EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
      EXPECT_NE(r.err.find(c.refusal), std::string::npos) << describe(r);
      EXPECT_EQ(pcr(), before);
      EXPECT_EQ((*attacker)->counters().salts_recovered, 0u) << "a session was salted to the attacker's key";
    } else {
      EXPECT_EQ(r.exit_code, 0) << describe(r);
      EXPECT_EQ(pcr(), extended_hex(before, attacker_digest())) << "the control attack did not take";
      EXPECT_GT((*attacker)->counters().salts_recovered, 0u);
    }
  }
}

// ---- A relay to another genuine TPM (issue 21) ----

// The interposer relays everything to the twin, a genuine TPM certified by
// the same CA: its EK certificate verifies as well as the genuine one's.
// Once the genuine EK is pinned (first verified use), the twin's EK is
// refused: exit 3, neither PCR changed. Forgetting the pin on purpose (a
// replaced TPM) makes the next use a first use again: a relay present at a
// first use wins, as TOFU (docs/threat-model.md).
TEST_F(EkSaltTest, RelayToAnotherGenuineTpmIsRefusedOnceTheEkIsPinned) {
  const auto state = fresh_state();
  std::string before = pcr(), twin_before = pcr(twin_swtpm_);
  auto first = through_proxy(extend_args({"--ek-ca", genuine_->trust_dir}), state);
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  EXPECT_NE(first.err.find("pinned the EK"), std::string::npos) << describe(first);
  EXPECT_EQ(pcr(), extended_hex(before, client_digest()));
  auto again = through_proxy(extend_args({"--ek-ca", genuine_->trust_dir}), state);
  EXPECT_EQ(again.exit_code, 0) << describe(again);
  EXPECT_EQ(again.err.find("pinned the EK"), std::string::npos) << "the pin was taken again: " << describe(again);

  std::unique_ptr<Direct> twin;
  size_t relayed = 0;
  proxy_->set_rule(relay_to_twin(twin, relayed));
  // --salt rsa: no RSA EK is pinned yet, but the TPM holding the RSA EK
  // must show the pinned ECC EK in a session salted to it.
  for (std::vector<std::string> args :
       {extend_args({"--ek-ca", genuine_->trust_dir}), extend_args({"--ek-ca", genuine_->trust_dir, "--salt", "ecc"}),
        extend_args({"--ek-ca", genuine_->trust_dir, "--salt", "rsa"}),
        std::vector<std::string>{"random", "16", "--ek-ca", genuine_->trust_dir}}) {
    SCOPED_TRACE(args[0] + " " + args.back());
    before = pcr();
    auto r = through_proxy(args, state);
    twin.reset();
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_NE(r.err.find("pinned"), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("null-key --forget"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(pcr(), before);
    EXPECT_EQ(pcr(twin_swtpm_), twin_before);
  }
  EXPECT_GT(relayed, 0u);

  // The genuine TPM's RSA EK, first used now, shows the pinned ECC EK.
  proxy_->set_rule(nullptr);
  before = pcr();
  auto rsa = through_proxy(extend_args({"--ek-ca", genuine_->trust_dir, "--salt", "rsa"}), state);
  EXPECT_EQ(rsa.exit_code, 0) << describe(rsa);
  EXPECT_EQ(pcr(), extended_hex(before, client_digest()));
  expect_no_handles("the RSA EK's first use");

  proxy_->set_rule(relay_to_twin(twin, relayed));
  auto forget = run_tpmsec({"null-key", "--forget", "--tpm", proxy_->spec()}, state);
  EXPECT_EQ(forget.exit_code, 0) << describe(forget);
  EXPECT_NE(forget.err.find("forgot the --ek-ca EK pin"), std::string::npos) << describe(forget);
  auto tofu = through_proxy(extend_args({"--ek-ca", genuine_->trust_dir}), state);
  twin.reset();
  EXPECT_EQ(tofu.exit_code, 0) << describe(tofu);
  EXPECT_EQ(pcr(twin_swtpm_), extended_hex(twin_before, client_digest())) << "the documented limit changed";
}

// A device: TPM with the kernel's pin of its null key (what Linux exports
// as /sys/class/tpm/tpm0/null_name): the TPM holding the certified EK must
// show that null key in a session salted to the EK. A relay to the twin is
// refused on the very first use, before anything is pinned; this machine's
// TPM passes and the proof is reported for the state directory, which then
// spares it for the rest of the boot. The device is a socketpair served
// by the interposer's client connection (support/test_tpm.h DeviceServer).
TEST_F(EkSaltTest, KernelPinCatchesARelayOnFirstUse) {
  auto name = run_tpmsec({"null-key", "--tpm", swtpm_->spec()});
  ASSERT_EQ(name.exit_code, 0) << describe(name);
  auto kernel_pin = from_hex(name.out.substr(0, name.out.find('\n')));
  ASSERT_TRUE(kernel_pin.ok());

  std::unique_ptr<Direct> twin;
  size_t relayed = 0, null_primaries = 0;
  Rule relay = relay_to_twin(twin, relayed);
  bool to_twin = false;
  proxy_->set_rule([&](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    auto f = parse_command(c.bytes);
    if (f.ok() && c.code == cc::kCreatePrimary && f->handles[0] == rh::kNull) ++null_primaries;
    return to_twin ? relay(c, tpm) : pass(c, tpm);
  });
  struct Outcome {
    Status status;
    std::vector<EkPin> verified;
  };
  auto create = [&](std::vector<EkPin> pins) -> Outcome {
    Outcome out;
    DeviceServer device;
    std::string error;
    auto backend = open_transport(proxy_->spec());
    if (!backend.ok() || !device.start(&error, std::move(*backend))) {
      out.status = runtime_error("cannot start the device: " + error);
      return out;
    }
    auto transport = device_from_fd(device.take_client_fd(), "/dev/tpm0");
    Tpm tpm(*transport);
    ProtectionConfig config;
    config.ek_ca = ca_bundle(genuine_->trust_dir);
    config.pinned_null_name = *kernel_pin;
    config.pin_origin = "the kernel's pin";
    config.ek_pins = std::move(pins);
    config.on_ek_verified = [&out](const EkPin& ek) {
      out.verified.push_back(ek);
      return ok_status();
    };
    auto factory = SessionFactory::create(tpm, config);
    out.status = status_of(factory);
    if (factory.ok()) {
      auto session = (*factory)->start(attr::kContinueSession);
      if (!session.ok()) out.status = session.error();
    }
    return out;
  };

  // First use, relayed to the twin: refused, nothing reported to pin.
  to_twin = true;
  std::string twin_before = pcr(twin_swtpm_);
  Outcome relayed_first = create({});
  proxy_->wait_idle();
  twin.reset();
  ASSERT_FALSE(relayed_first.status.ok());
  EXPECT_EQ(relayed_first.status.error().kind(), ErrorKind::kIntegrity) << relayed_first.status.error().message();
  EXPECT_NE(relayed_first.status.error().message().find("the kernel's pin"), std::string::npos)
      << relayed_first.status.error().message();
  EXPECT_TRUE(relayed_first.verified.empty()) << "the twin's EK was reported for pinning";
  EXPECT_GT(relayed, 0u);
  EXPECT_EQ(null_primaries, 1u);
  EXPECT_EQ(pcr(twin_swtpm_), twin_before);

  // This machine's TPM: proven, and reported so.
  to_twin = false;
  null_primaries = 0;
  Outcome genuine = create({});
  proxy_->wait_idle();
  ASSERT_TRUE(genuine.status.ok()) << genuine.status.error().message();
  ASSERT_EQ(genuine.verified.size(), 1u);
  EXPECT_TRUE(genuine.verified[0].null_key_proven);
  EXPECT_EQ(null_primaries, 1u);
  expect_no_handles("the null-key proof");

  // Proven this boot: no proof again, nothing new to report.
  null_primaries = 0;
  Outcome kept = create({genuine.verified[0]});
  proxy_->wait_idle();
  EXPECT_TRUE(kept.status.ok()) << kept.status.error().message();
  EXPECT_TRUE(kept.verified.empty());
  EXPECT_EQ(null_primaries, 0u);

  // A pin whose proof is of another boot: proven again.
  EkPin stale = genuine.verified[0];
  stale.null_key_proven = false;
  Outcome reproven = create({stale});
  proxy_->wait_idle();
  EXPECT_TRUE(reproven.status.ok()) << reproven.status.error().message();
  EXPECT_EQ(null_primaries, 1u);
  ASSERT_EQ(reproven.verified.size(), 1u);
  EXPECT_TRUE(reproven.verified[0].null_key_proven);
}

}  // namespace
}  // namespace tpmsec::testing
