// EK certificates and the EK template, without a TPM: loading a CA bundle,
// verifying a certificate against it, and turning the certified key into the
// EK's public area. Certificates are made with the openssl command in a
// temporary directory, valid from now on for a day, so nothing here depends
// on a fixed date.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "support/ek_provisioning.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "tpmsec/ek_certificate.h"
#include "tpmsec/ek_key.h"
#include "tpmsec/host/file_host_state.h"

namespace tpmsec {
namespace {

namespace fs = std::filesystem;
using crypto::CaBundle;
using crypto::CertifiedKey;

// A bundle as --ek-ca names it: files the operator gave, read by the host.
Result<CaBundle> load_ca_bundle_file(const std::string& file_or_dir) {
  return load_ca_bundle(file_or_dir, FileHostState());
}

class EkCertificateTest : public ::testing::Test {
 protected:
  // A root CA, an intermediate under it, and EK certificates the root issues
  // for keys of each type (support/ek_provisioning.h makes them with openssl).
  static void SetUpTestSuite() {
    if (!testing::have_program("openssl")) return;
    char tmpl[] = "/tmp/tpmsec-ekcert-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir_ = new std::string(tmpl);
    Status made = make_certificates();
    if (!made.ok()) *failure_ = made.error().message();
  }
  static Status make_certificates() {
    const std::vector<std::string> p256{"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"};
    for (const char* ca : {"root", "other-root"}) {
      TPMSEC_ASSIGN_OR_RETURN(testing::KeyFiles key, testing::make_key(*dir_, ca, p256));
      TPMSEC_RETURN_IF_ERROR(status_of(testing::issue_certificate(*dir_, ca_spec(ca, key.private_key, ""))));
    }
    TPMSEC_ASSIGN_OR_RETURN(testing::KeyFiles intermediate, testing::make_key(*dir_, "intermediate", p256));
    testing::CertificateSpec spec = ca_spec("intermediate", path("root.key"), path("root.pem"));
    spec.public_key = intermediate.public_key;
    TPMSEC_RETURN_IF_ERROR(status_of(testing::issue_certificate(*dir_, spec)));
    struct Leaf {
      const char* name;
      std::vector<std::string> args;
    };
    for (const Leaf& leaf :
         {Leaf{"p256", p256}, Leaf{"p384", {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"}},
          Leaf{"rsa2048", {"-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"}},
          Leaf{"ed25519", {"-algorithm", "ED25519"}}}) {
      TPMSEC_RETURN_IF_ERROR(status_of(issue(leaf.name, leaf.args, {})));
    }
    return ok_status();
  }
  // An EK certificate (unless `edit` makes it something else) issued by the
  // root for a new key.
  static Result<testing::CertificateFiles> issue(const std::string& name, const std::vector<std::string>& key_args,
                                                 const std::function<void(testing::CertificateSpec&)>& edit) {
    TPMSEC_ASSIGN_OR_RETURN(testing::KeyFiles key, testing::make_key(*dir_, name, key_args));
    testing::CertificateSpec spec{name, key.public_key, path("root.pem"), path("root.key")};
    if (edit) edit(spec);
    return testing::issue_certificate(*dir_, spec);
  }
  static testing::CertificateSpec ca_spec(const std::string& name, const std::string& key, const std::string& issuer) {
    testing::CertificateSpec spec{name, "", issuer, key};
    spec.ca = true;
    spec.key_usage = "keyCertSign, cRLSign";
    spec.extended_key_usage.clear();
    return spec;
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (!dir_) GTEST_SKIP() << "the openssl command is not installed (it makes the test certificates)";
    ASSERT_EQ(*failure_, "");
    for (const char* name : {"p256", "p384", "rsa2048", "ed25519"}) {
      ASSERT_TRUE(fs::exists(path(std::string(name) + ".der")))
          << "openssl did not make the " << name << " certificate";
    }
  }

  static std::string path(const std::string& name) { return (fs::path(*dir_) / name).string(); }
  static Bytes der(const std::string& name) {
    std::ifstream in(path(name + ".der"), std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // A directory holding exactly `files` (copied from the suite's directory).
  std::string bundle_dir(const std::string& name, std::vector<std::string> files) {
    fs::path d = fs::path(*dir_) / name;
    fs::create_directories(d);
    for (const std::string& f : files) fs::copy_file(path(f), d / f, fs::copy_options::overwrite_existing);
    return d.string();
  }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(path(name)) << text;
    return path(name);
  }
  CaBundle load(const std::string& p) {
    auto b = load_ca_bundle_file(p);
    EXPECT_TRUE(b.ok()) << b.error().message();
    return b.ok() ? *b : CaBundle{};
  }

  static std::string* dir_;
  static std::string* failure_;
};

std::string* EkCertificateTest::dir_ = nullptr;
std::string* EkCertificateTest::failure_ = new std::string();

// ---- The CA bundle ----

TEST_F(EkCertificateTest, MissingBundleIsAUsageError) {
  auto b = load_ca_bundle_file(path("no-such-bundle.pem"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(b.error().message().find("does not exist"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, EmptyDirectoryIsAUsageError) {
  auto b = load_ca_bundle_file(bundle_dir("empty", {}));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(b.error().message().find("no certificate"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, BadPemIsAUsageErrorNamingTheFile) {
  std::string bad = write("bad.pem", "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n");
  auto b = load_ca_bundle_file(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(b.error().message().find(bad), std::string::npos) << b.error().message();
  EXPECT_NE(b.error().message().find("not a valid PEM"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, FileWithoutACertificateIsAUsageError) {
  for (const std::string& f : {write("text.pem", "just some text\n"), path("p256.key"), path("p256.der")}) {
    SCOPED_TRACE(f);
    auto b = load_ca_bundle_file(f);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
    EXPECT_NE(b.error().message().find("holds no PEM certificate"), std::string::npos) << b.error().message();
  }
  // In a directory too: the file is named, never skipped silently.
  auto b = load_ca_bundle_file(bundle_dir("with-a-key", {"p256.pem", "p256.key"}));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("p256.key"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, LoadsEveryCertificateOfAFileOrADirectory) {
  std::ifstream a(path("root.pem")), b(path("other-root.pem"));
  std::string both((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
  both.append(std::istreambuf_iterator<char>(b), std::istreambuf_iterator<char>());
  EXPECT_EQ(load(write("both.pem", both)).size(), 2u);
  EXPECT_EQ(load(bundle_dir("two", {"root.pem", "other-root.pem"})).size(), 2u);
}

// ---- Verification ----

TEST_F(EkCertificateTest, VerifiesAgainstTheBundleAndReturnsTheKey) {
  CaBundle bundle = load(bundle_dir("anchors", {"root.pem"}));
  auto ecc = crypto::verify_ek_certificate(der("p256"), bundle);
  ASSERT_TRUE(ecc.ok()) << ecc.error().message();
  EXPECT_EQ(ecc->type, alg::kEcc);
  EXPECT_EQ(ecc->curve, curve::kNistP256);
  EXPECT_EQ(ecc->x.size(), 32u);
  EXPECT_EQ(ecc->y.size(), 32u);
  auto rsa = crypto::verify_ek_certificate(der("rsa2048"), bundle);
  ASSERT_TRUE(rsa.ok()) << rsa.error().message();
  EXPECT_EQ(rsa->type, alg::kRsa);
  EXPECT_EQ(rsa->modulus.size(), 256u);
  EXPECT_EQ(rsa->exponent, 65537u);
}

TEST_F(EkCertificateTest, CertificateOfAnotherIssuerIsAnIntegrityError) {
  CaBundle bundle = load(path("other-root.pem"));
  auto r = crypto::verify_ek_certificate(der("p256"), bundle);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(r.error().message().find("tpmsec test p256"), std::string::npos) << r.error().message();
}

TEST_F(EkCertificateTest, MalformedDerIsAParseError) {
  Bytes garbage{0x30, 0x82, 0x01, 0x00, 0x01, 0x02};
  auto r = crypto::certificate_public_key(garbage);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kParse);
  // Padding after the certificate (NV indices larger than it) is accepted;
  // anything else after it is not.
  Bytes padded = der("p256");
  padded.insert(padded.end(), 64, 0xFF);
  EXPECT_TRUE(crypto::certificate_public_key(padded).ok());
  Bytes trailing = der("p256");
  trailing.push_back(0x42);
  auto t = crypto::certificate_public_key(trailing);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind(), ErrorKind::kParse);
}

// ---- What makes a certificate an EK certificate (issue 21) ----

// Certificates the trusted root signed that are not EK certificates: each
// certifies a key someone holds, and each is refused naming why.
TEST_F(EkCertificateTest, OnlyAnEkCertificateOfTheCaIsAccepted) {
  CaBundle bundle = load(path("root.pem"));
  const std::vector<std::string> p256{"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"};
  const std::vector<std::string> rsa{"-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"};
  struct Case {
    const char* name;
    std::vector<std::string> key;
    std::function<void(testing::CertificateSpec&)> edit;
    const char* reason;
  };
  std::vector<Case> cases{
      {"tls-server", p256,
       [](testing::CertificateSpec& c) {
         c.key_usage = "digitalSignature, keyAgreement";
         c.extended_key_usage = "serverAuth";
       },
       "tcg-kp-EKCertificate"},
      {"no-eku", p256, [](testing::CertificateSpec& c) { c.extended_key_usage.clear(); }, "tcg-kp-EKCertificate"},
      {"ca-with-ek-eku", p256,
       [](testing::CertificateSpec& c) {
         c.ca = true;
         c.key_usage = "keyCertSign, keyAgreement";
       },
       "CA certificate"},
      {"ecc-signing-only", p256, [](testing::CertificateSpec& c) { c.key_usage = "digitalSignature"; }, "keyAgreement"},
      {"rsa-signing-only", rsa, [](testing::CertificateSpec& c) { c.key_usage = "digitalSignature"; },
       "keyEncipherment"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto cert = issue(c.name, c.key, c.edit);
    ASSERT_TRUE(cert.ok()) << cert.error().message();
    auto r = crypto::verify_ek_certificate(cert->der, bundle);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity);
    EXPECT_NE(r.error().message().find(c.reason), std::string::npos) << r.error().message();
  }
  // The same key as an EK certificate passes; with no keyUsage at all too,
  // and with keyEncipherment alone, as Intel's PTT and AMD's fTPM certify
  // their ECC EKs (ek_vendor_certificate_test.cc).
  for (const char* name : {"ek-with-usage", "ek-without-usage", "ek-key-encipherment"}) {
    SCOPED_TRACE(name);
    auto cert = issue(name, p256, [name](testing::CertificateSpec& c) {
      if (std::string(name) == "ek-without-usage") c.key_usage.clear();
      if (std::string(name) == "ek-key-encipherment") c.key_usage = "keyEncipherment";
    });
    ASSERT_TRUE(cert.ok()) << cert.error().message();
    auto r = crypto::verify_ek_certificate(cert->der, bundle);
    EXPECT_TRUE(r.ok()) << r.error().message();
  }
}

// A leaf certificate filed in the bundle anchors nothing, itself included:
// only CA certificates are kept, and chains end at a self-signed one.
TEST_F(EkCertificateTest, ALeafInTheBundleIsNoAnchor) {
  // An EK certificate issued by a CA the operator does not trust (the
  // attacker's), then filed in the bundle next to the genuine root.
  ASSERT_TRUE(testing::make_key(*dir_, "rogue-ca", {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"}).ok());
  ASSERT_TRUE(testing::issue_certificate(*dir_, ca_spec("rogue-ca", path("rogue-ca.key"), "")).ok());
  auto leaf =
      issue("rogue-ek", {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"}, [](testing::CertificateSpec& c) {
        c.issuer_cert = path("rogue-ca.pem");
        c.issuer_key = path("rogue-ca.key");
      });
  ASSERT_TRUE(leaf.ok()) << leaf.error().message();
  CaBundle bundle = load(bundle_dir("with-a-leaf", {"root.pem", "rogue-ek.pem"}));
  EXPECT_EQ(bundle.size(), 1u) << "the leaf was kept as an anchor";
  auto r = crypto::verify_ek_certificate(leaf->der, bundle);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity);
  // A self-signed leaf too.
  auto self = testing::issue_certificate(*dir_, testing::CertificateSpec{"self-ek", "", "", path("rogue-ca.key")});
  ASSERT_TRUE(self.ok()) << self.error().message();
  CaBundle with_self = load(bundle_dir("with-self", {"root.pem", "self-ek.pem"}));
  auto s = crypto::verify_ek_certificate(self->der, with_self);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::kIntegrity);
  // A bundle of leaves only has nothing to vouch with: the operator's mistake.
  auto only = load_ca_bundle_file(path("rogue-ek.pem"));
  ASSERT_FALSE(only.ok());
  EXPECT_EQ(only.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(only.error().message().find("no CA certificate"), std::string::npos) << only.error().message();
}

// root -> intermediate -> EK: the bundle holding both verifies it; the
// intermediate alone is no anchor (no partial chains), nor the root alone
// (the intermediate is not in the bundle).
TEST_F(EkCertificateTest, ChainsThroughAnIntermediateToARoot) {
  auto ek = issue("ek-under-intermediate", {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"},
                  [](testing::CertificateSpec& c) {
                    c.issuer_cert = path("intermediate.pem");
                    c.issuer_key = path("intermediate.key");
                  });
  ASSERT_TRUE(ek.ok()) << ek.error().message();
  auto ok = crypto::verify_ek_certificate(ek->der, load(bundle_dir("chain", {"root.pem", "intermediate.pem"})));
  EXPECT_TRUE(ok.ok()) << ok.error().message();
  for (const char* alone : {"intermediate.pem", "root.pem"}) {
    SCOPED_TRACE(alone);
    auto r = crypto::verify_ek_certificate(ek->der, load(path(alone)));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity);
  }
}

// An intermediate the bundle lacks comes only from the administrator's
// cache, found by the file name the EK certificate's AIA caIssuers URL ends
// in (nothing is fetched): cached under that name the chain verifies and
// ends at the bundle's root; under another name, or with no cache, it does
// not; and a cached certificate vouches for nothing by itself (a cache
// holding the root, with an empty-of-it bundle, verifies nothing).
TEST_F(EkCertificateTest, IntermediatesComeFromTheCacheTheAiaNames) {
  auto ek = issue(
      "ek-with-aia", {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"}, [](testing::CertificateSpec& c) {
        c.issuer_cert = path("intermediate.pem");
        c.issuer_key = path("intermediate.key");
        c.extra_extensions = "authorityInfoAccess = caIssuers;URI:http://pki.example.invalid/ek/inter-01.crt";
      });
  ASSERT_TRUE(ek.ok()) << ek.error().message();
  std::ifstream in(path("intermediate.der"), std::ios::binary);
  ASSERT_TRUE(fs::exists(path("intermediate.der")));
  std::string inter_der((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto verify_with = [&](const std::string& cached_name) {
    CaBundle bundle = load(path("root.pem"));
    if (!cached_name.empty()) {
      Status added = bundle.add_intermediates({crypto::PemFile{"/var/cache/x/" + cached_name, inter_der}});
      EXPECT_TRUE(added.ok()) << added.error().message();
    }
    return crypto::verify_ek_certificate(ek->der, bundle);
  };
  auto cached = verify_with("inter-01.crt");
  ASSERT_TRUE(cached.ok()) << cached.error().message();
  EXPECT_NE(cached->root_subject.find("tpmsec test root"), std::string::npos) << cached->root_subject;
  for (const char* other : {"", "inter-02.crt"}) {
    SCOPED_TRACE(std::string("cached as '") + other + "'");
    auto r = verify_with(other);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity);
  }
  // The root in the cache is no anchor: the chain must end in the bundle.
  CaBundle other = load(path("other-root.pem"));
  std::ifstream root_in(path("root.der"), std::ios::binary);
  std::string root_der((std::istreambuf_iterator<char>(root_in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(other.add_intermediates({{"inter-01.crt", inter_der}, {"root.crt", root_der}}).ok());
  auto r = crypto::verify_ek_certificate(ek->der, other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity);
  // Something that is no certificate in the cache is named.
  CaBundle bad = load(path("root.pem"));
  Status junk = bad.add_intermediates({{"/cache/junk.crt", "not a certificate"}});
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.error().message().find("junk.crt"), std::string::npos);
}

// ---- The EK's public area ----

// Template L-2 (EK Credential Profile §2.1.5.2) marshalled, field by field.
TEST_F(EkCertificateTest, EccTemplateIsL2) {
  auto bytes = marshal_to_bytes(ek_template(SaltKind::kEcc));
  ASSERT_TRUE(bytes.ok());
  std::string zeros(64, '0');
  EXPECT_EQ(to_hex(*bytes),
            "0023"
            "000b"
            "000300b2"
            "0020"
            "837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa"
            "0006"
            "0080"
            "0043"
            "0010"
            "0003"
            "0010"
            "0020" +
                zeros + "0020" + zeros);
}

// Template L-1 (§2.1.5.1): RSA-2048, exponent 0 (65537), unique 256 zero bytes.
TEST_F(EkCertificateTest, RsaTemplateIsL1) {
  auto bytes = marshal_to_bytes(ek_template(SaltKind::kRsa));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(to_hex(*bytes),
            "0001"
            "000b"
            "000300b2"
            "0020"
            "837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa"
            "0006"
            "0080"
            "0043"
            "0010"
            "0800"
            "00000000"
            "0100" +
                std::string(512, '0'));
}

TEST_F(EkCertificateTest, PublicAreaCarriesTheCertifiedKey) {
  auto key = crypto::certificate_public_key(der("p256"));
  ASSERT_TRUE(key.ok()) << key.error().message();
  auto pub = ek_public_from_certificate(SaltKind::kEcc, *key);
  ASSERT_TRUE(pub.ok()) << pub.error().message();
  Public expected = ek_template(SaltKind::kEcc);
  expected.unique_x = key->x;
  expected.unique_y = key->y;
  EXPECT_EQ(*pub, expected);
}

TEST_F(EkCertificateTest, WrongKeyTypeIsRefusedNamingIt) {
  struct Case {
    SaltKind kind;
    const char* cert;
    const char* named;
  };
  for (const Case& c : {Case{SaltKind::kEcc, "p384", "secp384r1"}, Case{SaltKind::kEcc, "rsa2048", "RSA-2048"},
                        Case{SaltKind::kRsa, "p256", "prime256v1"}, Case{SaltKind::kEcc, "ed25519", "ED25519"}}) {
    SCOPED_TRACE(c.cert);
    auto key = crypto::certificate_public_key(der(c.cert));
    ASSERT_TRUE(key.ok()) << key.error().message();
    auto pub = ek_public_from_certificate(c.kind, *key);
    ASSERT_FALSE(pub.ok());
    EXPECT_EQ(pub.error().kind(), ErrorKind::kUnsupported);
    EXPECT_NE(pub.error().message().find(c.named), std::string::npos) << pub.error().message();
  }
}

}  // namespace
}  // namespace tpmsec
