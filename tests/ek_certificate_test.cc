// EK certificates and the EK template, without a TPM: loading a CA bundle,
// verifying a certificate against it, and turning the certified key into the
// EK's public area. Certificates are made with the openssl command in a
// temporary directory, valid from now on for a day, so nothing here depends
// on a fixed date.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "tpmsec/ek_certificate.h"
#include "tpmsec/ek_key.h"

namespace tpmsec {
namespace {

namespace fs = std::filesystem;
using crypto::CaBundle;
using crypto::CertifiedKey;

class EkCertificateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::have_program("openssl")) return;
    char tmpl[] = "/tmp/tpmsec-ekcert-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir_ = new std::string(tmpl);
    // Self-signed: each is its own anchor when listed in a bundle.
    make_cert("p256", {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"});
    make_cert("p384", {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"});
    make_cert("rsa2048", {"-newkey", "rsa:2048"});
    make_cert("ed25519", {"-newkey", "ed25519"});
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (!dir_) GTEST_SKIP() << "the openssl command is not installed (it makes the test certificates)";
    for (const char* name : {"p256", "p384", "rsa2048", "ed25519"}) {
      ASSERT_TRUE(fs::exists(path(std::string(name) + ".der"))) << "openssl did not make the " << name << " certificate";
    }
  }

  static void make_cert(const std::string& name, std::vector<std::string> key_args) {
    std::vector<std::string> argv{"openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=tpmsec test " + name,
                                  "-keyout", path(name + ".key"), "-out", path(name + ".pem")};
    argv.insert(argv.end(), key_args.begin(), key_args.end());
    auto r = testing::run_command(argv);
    if (r.exit_code != 0) return;
    (void)testing::run_command({"openssl", "x509", "-in", path(name + ".pem"), "-outform", "DER", "-out",
                                path(name + ".der")});
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
    auto b = CaBundle::load(p);
    EXPECT_TRUE(b.ok()) << b.error().message();
    return b.ok() ? *b : CaBundle{};
  }

  static std::string* dir_;
};

std::string* EkCertificateTest::dir_ = nullptr;

// ---- The CA bundle ----

TEST_F(EkCertificateTest, MissingBundleIsAUsageError) {
  auto b = CaBundle::load(path("no-such-bundle.pem"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(b.error().message().find("does not exist"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, EmptyDirectoryIsAUsageError) {
  auto b = CaBundle::load(bundle_dir("empty", {}));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(b.error().message().find("no certificate"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, BadPemIsAUsageErrorNamingTheFile) {
  std::string bad = write("bad.pem", "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n");
  auto b = CaBundle::load(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(b.error().message().find(bad), std::string::npos) << b.error().message();
  EXPECT_NE(b.error().message().find("not a valid PEM"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, FileWithoutACertificateIsAUsageError) {
  for (const std::string& f : {write("text.pem", "just some text\n"), path("p256.key"), path("p256.der")}) {
    SCOPED_TRACE(f);
    auto b = CaBundle::load(f);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().kind(), ErrorKind::kUsage);
    EXPECT_NE(b.error().message().find("holds no PEM certificate"), std::string::npos) << b.error().message();
  }
  // In a directory too: the file is named, never skipped silently.
  auto b = CaBundle::load(bundle_dir("with-a-key", {"p256.pem", "p256.key"}));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("p256.key"), std::string::npos) << b.error().message();
}

TEST_F(EkCertificateTest, LoadsEveryCertificateOfAFileOrADirectory) {
  std::ifstream a(path("p256.pem")), b(path("rsa2048.pem"));
  std::string both((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
  both.append(std::istreambuf_iterator<char>(b), std::istreambuf_iterator<char>());
  EXPECT_EQ(load(write("both.pem", both)).size(), 2u);
  EXPECT_EQ(load(bundle_dir("two", {"p256.pem", "rsa2048.pem"})).size(), 2u);
}

// ---- Verification ----

TEST_F(EkCertificateTest, VerifiesAgainstTheBundleAndReturnsTheKey) {
  CaBundle bundle = load(bundle_dir("anchors", {"p256.pem", "rsa2048.pem"}));
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
  CaBundle bundle = load(path("rsa2048.pem"));
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

// ---- The EK's public area ----

// Template L-2 (EK Credential Profile §2.1.5.2) marshalled, field by field.
TEST_F(EkCertificateTest, EccTemplateIsL2) {
  auto bytes = marshal_to_bytes(ek_template(SaltKind::kEcc));
  ASSERT_TRUE(bytes.ok());
  std::string zeros(64, '0');
  EXPECT_EQ(to_hex(*bytes), "0023" "000b" "000300b2"
                            "0020" "837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa"
                            "0006" "0080" "0043" "0010" "0003" "0010"
                            "0020" + zeros + "0020" + zeros);
}

// Template L-1 (§2.1.5.1): RSA-2048, exponent 0 (65537), unique 256 zero bytes.
TEST_F(EkCertificateTest, RsaTemplateIsL1) {
  auto bytes = marshal_to_bytes(ek_template(SaltKind::kRsa));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(to_hex(*bytes), "0001" "000b" "000300b2"
                            "0020" "837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa"
                            "0006" "0080" "0043" "0010" "0800" "00000000"
                            "0100" + std::string(512, '0'));
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
