// Real TPMs' EK certificates (tests/data/ek-certs/; its SOURCES.tsv names
// the repository, path and commit each came from) against the chain builder
// `tpmsec serve` stands on: load_ek_roots (the package's data/ek-roots/,
// intermediates from an administrator's cache directory as --ek-intermediates
// names it) and crypto::verify_ek_certificate, the function --ek-ca uses too.
// Nothing is fetched. Validity periods end (the first of these in 2033), so
// every check is made at a fixed instant, kAt, and the date tests move that
// instant: nothing here reads today's date.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tpmsec/constants.h"
#include "tpmsec/ek_certificate.h"
#include "tpmsec/ek_key.h"
#include "tpmsec/host/file_host_state.h"

namespace tpmsec {
namespace {

namespace fs = std::filesystem;
using std::chrono::system_clock;

const std::string kCerts = TPMSEC_TEST_DATA "/ek-certs";
const std::string kCache = kCerts + "/intermediates";
const std::string kRoots = TPMSEC_DATA_DIR "/ek-roots";

// 2025-01-01T00:00:00Z, inside every period of every chain below.
const system_clock::time_point kAt = system_clock::from_time_t(1735689600);

struct VendorCert {
  const char* file;          // under tests/data/ek-certs/
  const char* vendor;        // the prefix of the vendor's files in data/ek-roots/
  const char* intermediate;  // the cache file its AIA caIssuers URL names; "" when a root issued it
  uint16_t type;
  const char* root;  // in the subject of the bundle's root the chain ends at
};

const VendorCert kVendorCerts[] = {
    {"Infineon-SLB9665/ek-rsa.pem", "Infineon-", "OptigaRsaMfrCA029.crt", alg::kRsa, "Infineon OPTIGA(TM) RSA Root CA"},
    {"Infineon-SLB9670/ek-rsa.pem", "Infineon-", "OptigaRsaMfrCA035.crt", alg::kRsa, "Infineon OPTIGA(TM) RSA Root CA"},
    {"Infineon-SLB9670/ek-ecc.pem", "Infineon-", "OptigaEccMfrCA035.crt", alg::kEcc, "Infineon OPTIGA(TM) ECC Root CA"},
    {"STMicro-ST33HTPHAHD8/ek-rsa.pem", "STMicro-", "stmtpmekint06.crt", alg::kRsa,
     "GlobalSign Trusted Platform Module Root CA"},
    {"Nuvoton-NPCT75x/ek-rsa.pem", "Nuvoton-", "", alg::kRsa, "Nuvoton TPM Root CA 2111"},
    {"Intel-PTT-SPT/ek-rsa.pem", "Intel-", "SPTHEPIDPROD_EK_Platform_Public_Key.cer", alg::kRsa,
     "TPM EK root cert signing"},
    {"Intel-PTT-GLK/ek-ecc.pem", "Intel-", "GLKEPIDPROD_EK_Platform_Public_Key.cer", alg::kEcc,
     "TPM EK root cert signing"},
    {"AMD-fTPM-RN/ek-ecc.pem", "AMD-", "CA6EA09EB84853EC720CD9BE5AAE73BF", alg::kEcc, "AMDTPM"},
};

// The DER of a PEM certificate file, as the TPM's NV index holds it.
Bytes der_of(const std::string& file) {
  std::ifstream in(kCerts + "/" + file);
  std::string pem((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = bio ? PEM_read_bio_X509(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  Bytes der;
  unsigned char* out = nullptr;
  int n = cert ? i2d_X509(cert, &out) : -1;
  if (n > 0) der.assign(out, out + n);
  OPENSSL_free(out);
  X509_free(cert);
  return der;
}

class EkVendorCertificateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/tpmsec-ekvendor-XXXXXX";
    if (::mkdtemp(tmpl)) dir_ = new std::string(tmpl);
  }
  static void TearDownTestSuite() {
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(dir_, nullptr) << "no temporary directory"; }

  // A copy of directory `from` without the files whose names start with `left_out`.
  static std::string copy_without(const std::string& from, const std::string& name, const std::string& left_out) {
    fs::path to = fs::path(*dir_) / name;
    fs::create_directories(to);
    for (const fs::directory_entry& e : fs::directory_iterator(from)) {
      if (e.path().filename().string().rfind(left_out, 0) != 0) fs::copy_file(e.path(), to / e.path().filename());
    }
    return to.string();
  }
  static Result<crypto::CaBundle> bundle(const std::string& roots, const std::string& cache) {
    return load_ek_roots(roots, cache, FileHostState());
  }
  // Refused as serve and --ek-ca refuse a certificate that does not verify:
  // kIntegrity (exit 3), with OpenSSL's reason.
  static void expect_refused(const Result<crypto::CertifiedKey>& r, const std::string& reason) {
    ASSERT_FALSE(r.ok()) << "accepted";
    EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity) << r.error().message();
    EXPECT_NE(r.error().message().find(reason), std::string::npos) << r.error().message();
  }

  static std::string* dir_;
};

std::string* EkVendorCertificateTest::dir_ = nullptr;

// Each chains, through the cached intermediate its AIA names, to the
// vendor's root of the shipped bundle, and its key becomes the EK's public
// area (template L-1 or L-2) the salt is encrypted to.
TEST_F(EkVendorCertificateTest, EveryRealEkCertificateChainsToTheShippedRoots) {
  auto roots = bundle(kRoots, kCache);
  ASSERT_TRUE(roots.ok()) << roots.error().message();
  for (const VendorCert& c : kVendorCerts) {
    SCOPED_TRACE(c.file);
    Bytes der = der_of(c.file);
    ASSERT_FALSE(der.empty()) << "not a PEM certificate";
    auto key = crypto::verify_ek_certificate(der, *roots, kAt);
    if (!key.ok()) {
      ADD_FAILURE() << key.error().message();  // and on to the next vendor
      continue;
    }
    EXPECT_EQ(key->type, c.type);
    EXPECT_NE(key->root_subject.find(c.root), std::string::npos) << key->root_subject;
    auto pub = ek_public_from_certificate(c.type == alg::kRsa ? SaltKind::kRsa : SaltKind::kEcc, *key);
    EXPECT_TRUE(pub.ok()) << pub.error().message();
  }
}

// The intermediate comes only from the cache, under the name the AIA URL
// ends in: left out of it, or with no cache at all, the chain breaks.
TEST_F(EkVendorCertificateTest, WithoutItsIntermediateInTheCacheItIsRefused) {
  auto no_cache = bundle(kRoots, "");
  ASSERT_TRUE(no_cache.ok()) << no_cache.error().message();
  for (const VendorCert& c : kVendorCerts) {
    if (std::string(c.intermediate).empty()) continue;
    SCOPED_TRACE(c.file);
    auto without = bundle(kRoots, copy_without(kCache, std::string("cache-without-") + c.intermediate, c.intermediate));
    ASSERT_TRUE(without.ok()) << without.error().message();
    expect_refused(crypto::verify_ek_certificate(der_of(c.file), *without, kAt),
                   "unable to get local issuer certificate");
    expect_refused(crypto::verify_ek_certificate(der_of(c.file), *no_cache, kAt),
                   "unable to get local issuer certificate");
  }
}

// A bundle without the vendor's root files vouches for none of its TPMs,
// whatever the cache holds.
TEST_F(EkVendorCertificateTest, WithoutTheVendorsRootInTheBundleItIsRefused) {
  for (const VendorCert& c : kVendorCerts) {
    SCOPED_TRACE(c.file);
    std::string name = std::string("roots-without-") + c.file;
    std::replace(name.begin(), name.end(), '/', '-');
    auto without = bundle(copy_without(kRoots, name, c.vendor), kCache);
    ASSERT_TRUE(without.ok()) << without.error().message();
    expect_refused(crypto::verify_ek_certificate(der_of(c.file), *without, kAt),
                   "unable to get local issuer certificate");
  }
}

// One bit of the signature's last byte flipped: the issuer's signature no
// longer verifies.
TEST_F(EkVendorCertificateTest, OneFlippedSignatureByteIsRefused) {
  auto roots = bundle(kRoots, kCache);
  ASSERT_TRUE(roots.ok()) << roots.error().message();
  for (const VendorCert& c : kVendorCerts) {
    SCOPED_TRACE(c.file);
    Bytes der = der_of(c.file);
    ASSERT_FALSE(der.empty());
    der.back() ^= 0x01;
    expect_refused(crypto::verify_ek_certificate(der, *roots, kAt), "certificate signature failure");
  }
}

// Every certificate of the chain is held to its period at the one instant
// of the check: the EK certificate's own (SLB 9670: 2018-03-01 to
// 2033-03-01), and a CA's even when the EK certificate's runs on (AMD's
// ECC root ends 2041-01-01, the fTPM's EK certificate 2046-04-13).
TEST_F(EkVendorCertificateTest, ValidityIsCheckedForTheWholeChainAtOneInstant) {
  auto roots = bundle(kRoots, kCache);
  ASSERT_TRUE(roots.ok()) << roots.error().message();
  const Bytes infineon = der_of("Infineon-SLB9670/ek-rsa.pem");
  // 2018-02-28 and 2033-03-02, 00:00 UTC.
  expect_refused(crypto::verify_ek_certificate(infineon, *roots, system_clock::from_time_t(1519776000)),
                 "certificate is not yet valid");
  expect_refused(crypto::verify_ek_certificate(infineon, *roots, system_clock::from_time_t(1993334400)),
                 "certificate has expired");
  // 2041-06-01 00:00 UTC.
  expect_refused(
      crypto::verify_ek_certificate(der_of("AMD-fTPM-RN/ek-ecc.pem"), *roots, system_clock::from_time_t(2253657600)),
      "certificate has expired");
}

}  // namespace
}  // namespace tpmsec
