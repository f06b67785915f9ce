// Known-answer tests for the salt of a salted session (tpmsec/salt.h): every
// label-"SECRET" case of go-tpm's labeled-encapsulation vectors (ECC and RSA),
// the salts libtpms accepted in a recorded session (one with a leading-zero Z),
// round trips of the randomized path decrypted with the vectors' private keys,
// and refusals (point off the curve, unusable RSA scheme).
#include <gtest/gtest.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include <fmt/format.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_data.h"
#include "tpmsec/bytes.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/salt.h"
#include "tpmsec/salt_key.h"
#include "tpmsec/structures.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using nlohmann::json;

using testing::Case;
using testing::H;
using testing::J;
json load(const std::string& file) { return testing::load_test_json(file); }
// The vectors of `file` whose label is "SECRET" (the salt of a session).
std::vector<Case> secret_cases(const std::string& file) {
  std::vector<Case> out;
  for (const json& c : load(file)) {
    if (c["Label"] == "SECRET") out.push_back({c["Name"].get<std::string>(), c});
  }
  return out;
}
std::string case_name(const ::testing::TestParamInfo<Case>& info) { return "case_" + info.param.name; }

json vector_named(const std::string& file, const std::string& name) {
  for (const json& c : load(file)) {
    if (c["Name"] == name) return c;
  }
  ADD_FAILURE() << "no vector " << name << " in " << file;
  return json::object();
}

Public public_of(const json& c) {
  auto key = unmarshal_exact<Public>(J(c["PublicKey"]), "PublicKey");
  EXPECT_TRUE(key.ok()) << (key.ok() ? "" : key.error().message());
  return key.ok() ? *key : Public{};
}

// The private part of a vector's key: the `sensitive` field of its
// TPMT_SENSITIVE (ECC: the scalar d; RSA: the prime p).
Bytes sensitive_of(const json& c) {
  Bytes bytes = J(c["PrivateKey"]);
  Reader r(bytes);
  r.u16("sensitiveType");
  r.tpm2b("authValue");
  r.tpm2b("seedValue");
  ByteView sensitive = r.tpm2b("sensitive");
  r.expect_end("TPMT_SENSITIVE");
  EXPECT_TRUE(r.ok());
  return Bytes(sensitive.begin(), sensitive.end());
}

// A RandomSource replaying fixed bytes, to pin make_salt's draws.
class FixedRandom final : public crypto::RandomSource {
 public:
  explicit FixedRandom(Bytes bytes) : bytes_(std::move(bytes)) {}
  Status fill(MutableByteView out) override {
    if (out.size() > bytes_.size() - pos_) return runtime_error("FixedRandom exhausted");
    std::copy(bytes_.begin() + pos_, bytes_.begin() + pos_ + out.size(), out.begin());
    pos_ += out.size();
    return ok_status();
  }
  bool used_up() const { return pos_ == bytes_.size(); }

 private:
  Bytes bytes_;
  size_t pos_ = 0;
};

json transcript_step(const std::string& step) {
  static const json transcript = load("session-transcript-libtpms.json");
  for (const json& s : transcript["steps"]) {
    if (s["step"] == step) return s;
  }
  ADD_FAILURE() << "no transcript step " << step;
  return json::object();
}

// ---------------------------------------------------------------------------
// ECC

class EccSecretVectors : public ::testing::TestWithParam<Case> {};
TEST_P(EccSecretVectors, MakeSaltEccMatches) {
  const json& c = GetParam().data;
  auto salted = make_salt_ecc(public_of(c), J(c["EphemeralPrivate"]));
  ASSERT_TRUE(salted.ok()) << salted.error().message();
  EXPECT_EQ(to_hex(salted->salt.view()), c["Secret"].get<std::string>());
  EXPECT_EQ(to_hex(salted->encrypted_salt), c["Ciphertext"].get<std::string>());
}
INSTANTIATE_TEST_SUITE_P(GoTpm, EccSecretVectors, ::testing::ValuesIn(secret_cases("ecc_labeled_encaps.json")),
                         case_name);

// The null-key case the README singles out (P-256, SHA-256) is among them.
TEST(EccSecretVectors, IncludeTheP256Sha256Cases) {
  int p256_sha256 = 0;
  for (const Case& c : secret_cases("ecc_labeled_encaps.json")) {
    Public key = public_of(c.data);
    p256_sha256 += key.curve == curve::kNistP256 && key.name_alg == alg::kSha256;
  }
  EXPECT_GE(p256_sha256, 2);
  EXPECT_EQ(vector_named("ecc_labeled_encaps.json", "04_R_P256_SHA256_128")["Validated"], "TPM2_StartAuthSession");
}

TEST(MakeSaltEcc, FlippedEphemeralBitGivesDifferentSalt) {
  json c = vector_named("ecc_labeled_encaps.json", "04_R_P256_SHA256_128");
  Bytes d = J(c["EphemeralPrivate"]);
  d[31] ^= 0x01;
  auto salted = make_salt_ecc(public_of(c), d);
  ASSERT_TRUE(salted.ok());
  EXPECT_NE(to_hex(salted->salt.view()), c["Secret"].get<std::string>());
  EXPECT_NE(to_hex(salted->encrypted_salt), c["Ciphertext"].get<std::string>());
}

TEST(MakeSaltEcc, RefusesPointNotOnCurve) {
  json c = vector_named("ecc_labeled_encaps.json", "04_R_P256_SHA256_128");
  Public key = public_of(c);
  key.unique_y.back() ^= 0x01;
  auto salted = make_salt_ecc(key, J(c["EphemeralPrivate"]));
  ASSERT_FALSE(salted.ok());
  EXPECT_EQ(salted.error().kind(), ErrorKind::kIntegrity);
  FixedRandom rng(J(c["EphemeralPrivate"]));
  EXPECT_EQ(make_salt(key, rng).error().kind(), ErrorKind::kIntegrity);

  key = public_of(c);
  key.unique_x.clear();  // the template's empty unique: not a point
  EXPECT_FALSE(make_salt_ecc(key, J(c["EphemeralPrivate"])).ok());
}

TEST(MakeSaltEcc, RefusesWrongKeyType) {
  json c = vector_named("rsa_labeled_encaps.json", "13_R_2048_SHA256_256");
  EXPECT_FALSE(make_salt_ecc(public_of(c), Bytes(32, 1)).ok());
}

// Salts libtpms accepted (swtpm 0.7.1 / libtpms 0.9.2); the first has Z = 00c5….
TEST(MakeSaltEcc, MatchesLibtpmsTranscriptIncludingLeadingZeroZ) {
  json create = transcript_step("CreatePrimary(RH_NULL, ECC P-256)");
  auto null_key = unmarshal_exact<Public>(J(create["outPublic"]), "outPublic");
  ASSERT_TRUE(null_key.ok());
  int leading_zero_z = 0;
  for (const char* name : {"StartAuthSession salted AES-128-CFB", "StartAuthSession salted XOR",
                           "StartAuthSession salted+bound AES-128-CFB"}) {
    SCOPED_TRACE(name);
    json start = transcript_step(name);
    leading_zero_z += start["Z"].get<std::string>().starts_with("00");
    auto salted = make_salt_ecc(*null_key, J(start["ephemeralPrivate"]));
    ASSERT_TRUE(salted.ok()) << salted.error().message();
    EXPECT_EQ(to_hex(salted->salt.view()), start["salt"].get<std::string>());
    // encryptedSalt as sent: 0044 ‖ 0020 Q_e.x ‖ 0020 Q_e.y.
    std::string expected =
        "0020" + start["ephemeralX"].get<std::string>() + "0020" + start["ephemeralY"].get<std::string>();
    EXPECT_EQ(to_hex(salted->encrypted_salt), expected);
    EXPECT_NE(start["command"].get<std::string>().find("0044" + expected), std::string::npos);
  }
  EXPECT_EQ(leading_zero_z, 1);
}

TEST(MakeSalt, EccDrawsTheEphemeralKeyFromTheSource) {
  json c = vector_named("ecc_labeled_encaps.json", "04_R_P256_SHA256_128");
  FixedRandom rng(J(c["EphemeralPrivate"]));
  auto salted = make_salt(public_of(c), rng);
  ASSERT_TRUE(salted.ok()) << salted.error().message();
  EXPECT_TRUE(rng.used_up());
  EXPECT_EQ(to_hex(salted->salt.view()), c["Secret"].get<std::string>());
  EXPECT_EQ(to_hex(salted->encrypted_salt), c["Ciphertext"].get<std::string>());
}

// The randomized path, recovered as the TPM would: Z = x(d_key · Q_e).
TEST(MakeSalt, EccRandomSaltIsRecoverableWithTheKeysPrivateScalar) {
  json c = vector_named("ecc_labeled_encaps.json", "04_R_P256_SHA256_128");
  Public key = public_of(c);
  auto salted = make_salt(key, crypto::system_random());
  ASSERT_TRUE(salted.ok());
  Reader r(salted->encrypted_salt);
  ByteView x = r.tpm2b("x"), y = r.tpm2b("y");
  r.expect_end("encryptedSalt");
  ASSERT_TRUE(r.ok());
  crypto::EccPoint q_e{Bytes(x.begin(), x.end()), Bytes(y.begin(), y.end())};
  auto tpm_side = crypto::ecdh_ephemeral(key.curve, q_e, sensitive_of(c));
  ASSERT_TRUE(tpm_side.ok());
  auto salt = crypto::kdfe(key.name_alg, tpm_side->z.view(), "SECRET", q_e.x, key.unique_x, 256);
  ASSERT_TRUE(salt.ok());
  EXPECT_EQ(to_hex(salt->view()), to_hex(salted->salt.view()));
  EXPECT_NE(to_hex(salted->salt.view()), c["Secret"].get<std::string>());
}

// ---------------------------------------------------------------------------
// RSA

class RsaSecretVectors : public ::testing::TestWithParam<Case> {};
TEST_P(RsaSecretVectors, MakeSaltRsaMatches) {
  const json& c = GetParam().data;
  auto salted = make_salt_rsa(public_of(c), J(c["Secret"]), J(c["OAEPSalt"]));
  ASSERT_TRUE(salted.ok()) << salted.error().message();
  EXPECT_EQ(to_hex(salted->salt.view()), c["Secret"].get<std::string>());
  EXPECT_EQ(to_hex(salted->encrypted_salt), c["Ciphertext"].get<std::string>());
}
INSTANTIATE_TEST_SUITE_P(GoTpm, RsaSecretVectors, ::testing::ValuesIn(secret_cases("rsa_labeled_encaps.json")),
                         case_name);

TEST(RsaSecretVectors, IncludeTheRsa2048Sha256Case) {
  json c = vector_named("rsa_labeled_encaps.json", "13_R_2048_SHA256_256");
  EXPECT_EQ(c["Label"], "SECRET");
  Public key = public_of(c);
  EXPECT_EQ(key.key_bits, 2048);
  EXPECT_EQ(key.name_alg, alg::kSha256);
}

TEST(MakeSaltRsa, FlippedSeedBitGivesDifferentCiphertext) {
  json c = vector_named("rsa_labeled_encaps.json", "13_R_2048_SHA256_256");
  Bytes seed = J(c["OAEPSalt"]);
  seed[5] ^= 0x20;
  auto salted = make_salt_rsa(public_of(c), J(c["Secret"]), seed);
  ASSERT_TRUE(salted.ok());
  EXPECT_NE(to_hex(salted->encrypted_salt), c["Ciphertext"].get<std::string>());
}

TEST(MakeSaltRsa, UsesTheOaepSchemeHashWhenTheKeyHasOne) {
  // 55_U_2048_SHA1_SHA384: nameAlg SHA-1, scheme OAEP with SHA-384.
  json c = vector_named("rsa_labeled_encaps.json", "55_U_2048_SHA1_SHA384");
  Public key = public_of(c);
  ASSERT_EQ(key.scheme.scheme, alg::kOaep);
  EXPECT_EQ(*rsa_secret_hash(key), alg::kSha384);
  EXPECT_EQ(J(c["Secret"]).size(), 48u);
}

TEST(MakeSaltRsa, RefusesUnusableKeysAndSalts) {
  json c = vector_named("rsa_labeled_encaps.json", "13_R_2048_SHA256_256");
  Public key = public_of(c);
  EXPECT_FALSE(make_salt_rsa(key, Bytes(33, 1), {}).ok());  // larger than the digest: the TPM refuses it
  EXPECT_FALSE(make_salt_rsa(key, {}, {}).ok());
  Public rsaes = key;
  rsaes.scheme = {alg::kRsaes, 0, 0};
  EXPECT_EQ(make_salt_rsa(rsaes, Bytes(32, 1), {}).error().kind(), ErrorKind::kUnsupported);
  Public keyed_hash = key;
  keyed_hash.type = alg::kKeyedHash;
  EXPECT_FALSE(make_salt(keyed_hash, crypto::system_random()).ok());
}

TEST(MakeSalt, RsaDrawsSaltThenSeedFromTheSource) {
  json c = vector_named("rsa_labeled_encaps.json", "13_R_2048_SHA256_256");
  FixedRandom rng(concat({J(c["Secret"]), J(c["OAEPSalt"])}));
  auto salted = make_salt(public_of(c), rng);
  ASSERT_TRUE(salted.ok()) << salted.error().message();
  EXPECT_TRUE(rng.used_up());
  EXPECT_EQ(to_hex(salted->salt.view()), c["Secret"].get<std::string>());
  EXPECT_EQ(to_hex(salted->encrypted_salt), c["Ciphertext"].get<std::string>());
}

// The randomized path, decrypted by OpenSSL's own OAEP with the vector's private key.
TEST(MakeSalt, RsaRandomSaltDecryptsWithOpenSslOaep) {
  json c = vector_named("rsa_labeled_encaps.json", "13_R_2048_SHA256_256");
  Public key = public_of(c);
  auto salted = make_salt(key, crypto::system_random());
  ASSERT_TRUE(salted.ok());
  ASSERT_EQ(salted->salt.size(), 32u);

  // Private key from n, e and the prime p.
  auto bn = [](ByteView b) {
    return std::unique_ptr<BIGNUM, decltype(&BN_clear_free)>(BN_bin2bn(b.data(), static_cast<int>(b.size()), nullptr),
                                                             BN_clear_free);
  };
  auto n = bn(key.unique_x), p = bn(sensitive_of(c));
  std::unique_ptr<BIGNUM, decltype(&BN_clear_free)> e(BN_new(), BN_clear_free), q(BN_new(), BN_clear_free),
      phi(BN_new(), BN_clear_free), d(BN_new(), BN_clear_free), p1(BN_new(), BN_clear_free),
      q1(BN_new(), BN_clear_free);
  std::unique_ptr<BN_CTX, decltype(&BN_CTX_free)> bn_ctx(BN_CTX_new(), BN_CTX_free);
  ASSERT_TRUE(BN_set_word(e.get(), key.exponent ? key.exponent : 65537));
  ASSERT_TRUE(BN_div(q.get(), nullptr, n.get(), p.get(), bn_ctx.get()));
  ASSERT_TRUE(BN_sub(p1.get(), p.get(), BN_value_one()) && BN_sub(q1.get(), q.get(), BN_value_one()));
  ASSERT_TRUE(BN_mul(phi.get(), p1.get(), q1.get(), bn_ctx.get()));
  ASSERT_TRUE(BN_mod_inverse(d.get(), e.get(), phi.get(), bn_ctx.get()));
  std::unique_ptr<OSSL_PARAM_BLD, decltype(&OSSL_PARAM_BLD_free)> bld(OSSL_PARAM_BLD_new(), OSSL_PARAM_BLD_free);
  ASSERT_TRUE(OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, n.get()) &&
              OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, e.get()) &&
              OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_D, d.get()));
  std::unique_ptr<OSSL_PARAM, decltype(&OSSL_PARAM_free)> params(OSSL_PARAM_BLD_to_param(bld.get()), OSSL_PARAM_free);
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> import(
      EVP_PKEY_CTX_new_from_name(nullptr, "RSA", nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* raw_key = nullptr;
  ASSERT_EQ(EVP_PKEY_fromdata_init(import.get()), 1);
  ASSERT_EQ(EVP_PKEY_fromdata(import.get(), &raw_key, EVP_PKEY_KEYPAIR, params.get()), 1);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> private_key(raw_key, EVP_PKEY_free);

  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> decrypt(
      EVP_PKEY_CTX_new_from_pkey(nullptr, private_key.get(), nullptr), EVP_PKEY_CTX_free);
  ASSERT_EQ(EVP_PKEY_decrypt_init(decrypt.get()), 1);
  ASSERT_EQ(EVP_PKEY_CTX_set_rsa_padding(decrypt.get(), RSA_PKCS1_OAEP_PADDING), 1);
  ASSERT_EQ(EVP_PKEY_CTX_set_rsa_oaep_md(decrypt.get(), EVP_sha256()), 1);
  ASSERT_EQ(EVP_PKEY_CTX_set_rsa_mgf1_md(decrypt.get(), EVP_sha256()), 1);
  char* label = static_cast<char*>(OPENSSL_malloc(7));
  std::memcpy(label, "SECRET", 7);  // with its NUL, as the TPM uses it
  ASSERT_EQ(EVP_PKEY_CTX_set0_rsa_oaep_label(decrypt.get(), label, 7), 1);
  Bytes plain(256);
  size_t plain_size = plain.size();
  ASSERT_EQ(EVP_PKEY_decrypt(decrypt.get(), plain.data(), &plain_size, salted->encrypted_salt.data(),
                             salted->encrypted_salt.size()),
            1);
  plain.resize(plain_size);
  EXPECT_EQ(to_hex(plain), to_hex(salted->salt.view()));
}

// What may be pinned as a persistent salt key (salt_key.h): the null key of
// the libtpms transcript is such a key; each property it needs, taken away,
// makes it one the salt could leak to. Without restricted, whoever may use
// the key has the TPM decrypt any session's salt (RSA_Decrypt, ECDH_ZGen).
TEST(SaltKeyPublic, OnlyAKeyMadeInsideTheTpmMayTakeTheSalt) {
  json create = transcript_step("CreatePrimary(RH_NULL, ECC P-256)");
  auto key = unmarshal_exact<Public>(J(create["outPublic"]), "outPublic");
  ASSERT_TRUE(key.ok());
  EXPECT_TRUE(check_salt_key_public(*key).ok());
  for (uint32_t needed : {object_attr::kFixedTpm, object_attr::kFixedParent, object_attr::kSensitiveDataOrigin,
                          object_attr::kDecrypt, object_attr::kRestricted}) {
    SCOPED_TRACE(needed);
    Public p = *key;
    p.attributes &= ~needed;
    Status st = check_salt_key_public(p);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
  }
  Public off_curve = *key;
  off_curve.unique_y.back() ^= 1;
  EXPECT_FALSE(check_salt_key_public(off_curve).ok());
  Public sha1 = *key;
  sha1.name_alg = alg::kSha1;
  EXPECT_FALSE(check_salt_key_public(sha1).ok());
}

// A restricted decryption key is a storage key: one that also signs is not
// (the TPM makes none, but a kept file could say so), and its symmetric
// definition is the SRK template's, AES-128 CFB.
TEST(SaltKeyPublic, OnlyARestrictedStorageKeyWithTheSrkSymmetricMayTakeTheSalt) {
  json create = transcript_step("CreatePrimary(RH_NULL, ECC P-256)");
  auto key = unmarshal_exact<Public>(J(create["outPublic"]), "outPublic");
  ASSERT_TRUE(key.ok());
  Public unrestricted = *key;
  unrestricted.attributes &= ~object_attr::kRestricted;
  Status st = check_salt_key_public(unrestricted);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(st.error().message().find("not a restricted decryption key"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("ECDH_ZGen"), std::string::npos) << st.error().message();
  Public signs = *key;
  signs.attributes |= object_attr::kSign;
  EXPECT_FALSE(check_salt_key_public(signs).ok());
  for (SymDef other : {SymDef{alg::kAes, 256, alg::kCfb}, SymDef{}, SymDef{alg::kAes, 128, alg::kCtr}}) {
    SCOPED_TRACE(fmt::format("{:04x} {} {:04x}", other.algorithm, other.key_bits, other.mode));
    Public p = *key;
    p.symmetric = other;
    Status refused = check_salt_key_public(p);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().kind(), ErrorKind::kIntegrity);
    EXPECT_NE(refused.error().message().find("AES-128 CFB"), std::string::npos) << refused.error().message();
  }
}

// A kept salt key whose file was edited to a key that can leave the TPM is
// not used: the file is refused (kParse), never read as a weaker anchor.
TEST(SaltKeyStore, KeepsWhatItPinnedAndRefusesAnEditedFile) {
  json create = transcript_step("CreatePrimary(RH_NULL, ECC P-256)");
  auto pub = unmarshal_exact<Public>(J(create["outPublic"]), "outPublic");
  ASSERT_TRUE(pub.ok());
  const std::string dir = ::testing::TempDir() + "salt-key-store";
  std::filesystem::remove_all(dir);
  FileHostState store(dir);
  const TpmId tpm = TpmId::of("swtpm:port=1");
  PersistentSaltKey k;
  k.handle = kDefaultSaltKeyHandle;
  k.public_area = *pub;
  k.name = compute_name(*pub).value();
  ASSERT_TRUE(store.put_salt_key(tpm, k).ok());
  auto back = store.salt_key(tpm);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->name, k.name);
  EXPECT_EQ((*back)->handle, kDefaultSaltKeyHandle);
  EXPECT_FALSE((*back)->created);
  auto other = store.salt_key(TpmId::of("swtpm:port=2"));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());

  // Edited to a key that can leave the TPM, and to an unrestricted one.
  const std::string file = store.where(StateRecord::kSaltKey, tpm);
  const std::string kept = testing::slurp(file);
  for (uint32_t taken : {object_attr::kFixedTpm, object_attr::kRestricted}) {
    SCOPED_TRACE(taken);
    Public weak = *pub;
    weak.attributes &= ~taken;
    std::string text = kept;
    std::string old_hex = to_hex(marshal_to_bytes(*pub).value());
    text.replace(text.find(old_hex), old_hex.size(), to_hex(marshal_to_bytes(weak).value()));
    std::ofstream(file, std::ios::trunc) << text;
    auto edited = store.salt_key(tpm);
    ASSERT_FALSE(edited.ok());
    EXPECT_EQ(edited.error().kind(), ErrorKind::kParse);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tpmsec
