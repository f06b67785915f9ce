// The null primary's template, its name, and the name a user pins
// (tpmsec/null_key.h; Linux drivers/char/tpm/tpm2-sessions.c, tpm2_create_null_primary): the ECC template marshals to
// the TCG "SRK template H" bytes, compute_name() reproduces the name libtpms returned in the recorded transcript, and
// parse_null_name() takes the kernel's /sys/class/tpm/tpm0/null_name format (hex, trailing newline) and refuses
// anything that is not a hash algorithm id followed by a digest of its size.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/test_data.h"
#include "tpmsec/bytes.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/null_key.h"
#include "tpmsec/structures.h"

namespace tpmsec {
namespace {

using nlohmann::json;

// Linux's null-key template: ECC, SHA-256, 0x00030472, empty policy, AES-128-CFB, NULL
// scheme, P-256, NULL kdf, empty x and y.
constexpr std::string_view kEccTemplate = "0023000b00030472000000060080004300100003001000000000";
// Its RSA-2048 twin: NULL scheme, 2048 bits, exponent 0 (65537), empty modulus.
constexpr std::string_view kRsaTemplate = "0001000b00030472000000060080004300100800000000000000";

using testing::H;

// Step 0 of the recorded transcript: CreatePrimary of the null key.
json create_primary_step() {
  std::string path = std::string(TPMSEC_TEST_DATA) + "/session-transcript-libtpms.json";
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path;
    return json::object();
  }
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("steps")) {
    ADD_FAILURE() << path << " has no steps";
    return json::object();
  }
  for (const json& s : doc["steps"]) {
    if (s.value("step", "").starts_with("CreatePrimary")) return s;
  }
  ADD_FAILURE() << "no CreatePrimary step in " << path;
  return json::object();
}

// The recorded null key name (68 hex digits).
std::string recorded_name_hex() {
  json step = create_primary_step();
  return step.value("name", "");
}

// A file under the test's temporary directory, removed on destruction.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    path_ = ::testing::TempDir() + "tpmsec_null_name_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++);
    std::ofstream out(path_, std::ios::binary);
    out << contents;
    EXPECT_TRUE(out.good()) << "cannot write " << path_;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

void expect_usage_error(const std::string& input, const std::string& why) {
  auto r = parse_null_name(input, FileHostState());
  ASSERT_FALSE(r.ok()) << why << ": accepted \"" << input << "\" as " << to_hex(*r);
  EXPECT_EQ(r.error().kind(), ErrorKind::kUsage) << why << ": " << r.error().message();
}

TEST(NullKeyTemplate, EccTemplateMarshalsToSrkTemplateH) {
  EXPECT_EQ(to_hex(marshal_to_bytes(null_key_template(SaltKind::kEcc)).value()), kEccTemplate);
}

TEST(NullKeyTemplate, EccTemplateFields) {
  Public p = null_key_template(SaltKind::kEcc);
  EXPECT_EQ(p.type, alg::kEcc);
  EXPECT_EQ(p.name_alg, alg::kSha256);
  EXPECT_EQ(p.attributes, 0x00030472u);
  EXPECT_TRUE(p.auth_policy.empty());
  EXPECT_EQ(p.symmetric, SymDef::aes128_cfb());
  EXPECT_EQ(p.scheme.scheme, alg::kNull);
  EXPECT_EQ(p.curve, curve::kNistP256);
  EXPECT_EQ(p.kdf.scheme, alg::kNull);
  EXPECT_TRUE(p.unique_x.empty());
  EXPECT_TRUE(p.unique_y.empty());
  // It parses back to itself.
  auto parsed = unmarshal_exact<Public>(H(kEccTemplate), "template");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  EXPECT_TRUE(*parsed == p);
}

TEST(NullKeyTemplate, RsaTemplateMarshalsToItsTwin) {
  EXPECT_EQ(to_hex(marshal_to_bytes(null_key_template(SaltKind::kRsa)).value()), kRsaTemplate);
}

TEST(NullKeyName, ComputeNameReproducesTheRecordedName) {
  json step = create_primary_step();
  ASSERT_TRUE(step.contains("outPublic") && step.contains("name"));
  Bytes out_public = H(step["outPublic"].get<std::string>());
  auto pub = unmarshal_exact<Public>(out_public, "outPublic");
  ASSERT_TRUE(pub.ok()) << pub.error().message();
  // The TPM created the template with its point filled in.
  Public expected = null_key_template(SaltKind::kEcc);
  expected.unique_x = pub->unique_x;
  expected.unique_y = pub->unique_y;
  EXPECT_TRUE(*pub == expected);
  EXPECT_EQ(to_hex(marshal_to_bytes(*pub).value()), to_hex(out_public))
      << "outPublic does not re-marshal byte for byte";

  auto name = compute_name(*pub);
  ASSERT_TRUE(name.ok()) << name.error().message();
  EXPECT_EQ(to_hex(*name), step["name"].get<std::string>());
  // Name = nameAlg || SHA-256(TPMT_PUBLIC).
  auto digest = crypto::hash(alg::kSha256, {out_public});
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(to_hex(*name), "000b" + to_hex(*digest));
}

TEST(NullKeyName, ComputeNameFollowsTheNameAlg) {
  Public p = null_key_template(SaltKind::kEcc);
  p.name_alg = alg::kSha384;
  auto name = compute_name(p);
  ASSERT_TRUE(name.ok()) << name.error().message();
  auto digest = crypto::hash(alg::kSha384, {marshal_to_bytes(p).value()});
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(to_hex(*name), "000c" + to_hex(*digest));
  EXPECT_EQ(name->size(), 2u + 48u);
}

TEST(ParseNullName, AcceptsSixtyEightHexDigits) {
  std::string hex = recorded_name_hex();
  ASSERT_EQ(hex.size(), 68u);
  auto name = parse_null_name(hex, FileHostState());
  ASSERT_TRUE(name.ok()) << name.error().message();
  EXPECT_EQ(to_hex(*name), hex);

  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto from_upper = parse_null_name(upper, FileHostState());
  ASSERT_TRUE(from_upper.ok()) << from_upper.error().message();
  EXPECT_EQ(to_hex(*from_upper), hex);
}

TEST(ParseNullName, AcceptsAFileInTheSysfsFormat) {
  std::string hex = recorded_name_hex();
  TempFile file(hex + "\n");  // as /sys/class/tpm/tpm0/null_name reads
  ASSERT_NE(file.path().find('/'), std::string::npos);
  auto name = parse_null_name(file.path(), FileHostState());
  ASSERT_TRUE(name.ok()) << name.error().message();
  EXPECT_EQ(to_hex(*name), hex);
}

TEST(ParseNullName, RejectsAWrongLength) {
  std::string hex = recorded_name_hex();
  ASSERT_EQ(hex.size(), 68u);
  expect_usage_error(hex.substr(0, 66), "one digest byte short");
  expect_usage_error(hex + "00", "one byte too many");
  expect_usage_error("000b", "a hash id without a digest");
  expect_usage_error("00", "one byte");
  expect_usage_error("", "empty");
  // 68 digits, but SHA-384 needs a 48-byte digest.
  expect_usage_error("000c" + hex.substr(4), "SHA-384 id with a SHA-256-sized digest");
  TempFile short_file(hex.substr(0, 66) + "\n");
  expect_usage_error(short_file.path(), "a file holding a short name");
}

TEST(ParseNullName, RejectsBadHex) {
  std::string hex = recorded_name_hex();
  ASSERT_EQ(hex.size(), 68u);
  expect_usage_error(hex.substr(0, 67), "odd number of digits");
  std::string bad = hex;
  bad[10] = 'g';
  expect_usage_error(bad, "a non-hex digit");
  expect_usage_error("000b " + hex.substr(4), "an embedded space");
  TempFile bad_file("zz" + hex.substr(2) + "\n");
  expect_usage_error(bad_file.path(), "a file holding non-hex text");
}

TEST(ParseNullName, RejectsAnUnknownHashId) {
  std::string digest = recorded_name_hex().substr(4);
  ASSERT_EQ(digest.size(), 64u);
  expect_usage_error("0099" + digest, "hash id 0x0099");
  expect_usage_error("0010" + digest, "TPM_ALG_NULL");
  expect_usage_error("0023" + digest, "TPM_ALG_ECC is not a hash");
}

TEST(ParseNullName, RejectsAMissingFile) {
  expect_usage_error(::testing::TempDir() + "tpmsec_no_such_null_name_file", "a path that does not exist");
}

}  // namespace
}  // namespace tpmsec
