// Plain PCR commands and TPM info on real TPMs over every transport.
#include <openssl/sha.h>

#include "support/test_tpm.h"
#include "tpmsec/emulation/tpm_info_json.h"
#include "tpmsec/pcr.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {
namespace {

using testing::TpmTest;

Bytes sha256_concat(ByteView a, ByteView b) {
  Bytes in(a.begin(), a.end());
  in.insert(in.end(), b.begin(), b.end());
  Bytes out(32);
  SHA256(in.data(), in.size(), out.data());
  return out;
}

class PcrTest : public TpmTest {};

TEST_P(PcrTest, InfoReportsTheReferenceTpm) {
  auto info = read_tpm_info(tpm());
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->manufacturer, "IBM");
  EXPECT_EQ(info->manufacturer_raw, 0x49424D00u);
  EXPECT_EQ(info->spec_family, "2.0");
  EXPECT_EQ(info->pcr_count, 24u);
  EXPECT_TRUE(info->ecc_p256);
  EXPECT_TRUE(info->rsa_2048);
  ASSERT_NE(info->bank(alg::kSha256), nullptr);
  EXPECT_EQ(info->bank(alg::kSha256)->pcrs.size(), 24u);
  EXPECT_GE(info->max_loaded_sessions, 3u);
  EXPECT_GE(info->max_transient_objects, 3u);
  EXPECT_GT(info->max_session_context, 0u);
  auto j = to_json(*info);
  EXPECT_EQ(j["manufacturer"], "IBM");
  EXPECT_EQ(j["manufacturer_raw"], "0x49424D00");
  EXPECT_EQ(j["ecc_p256"], true);
}

TEST_P(PcrTest, ExtendChainsAsSha256OfOldAndDigest) {
  ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
  auto v0 = pcr_read(tpm(), alg::kSha256, 16);
  ASSERT_TRUE(v0.ok()) << v0.error().message();
  EXPECT_EQ(*v0, Bytes(32, 0));
  Bytes expected = *v0;
  for (int i = 0; i < 5; ++i) {
    Bytes d(32, static_cast<uint8_t>(0xA0 + i));
    Status st = pcr_extend(tpm(), alg::kSha256, 16, d);
    ASSERT_TRUE(st.ok()) << st.error().message();
    expected = sha256_concat(expected, d);
  }
  auto v = pcr_read(tpm(), alg::kSha256, 16);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(to_hex(*v), to_hex(expected));
  ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
  EXPECT_EQ(*pcr_read(tpm(), alg::kSha256, 16), Bytes(32, 0));
}

TEST_P(PcrTest, Sha1BankExtends) {
  auto before = pcr_read(tpm(), alg::kSha1, 16);
  auto sha256_before = pcr_read(tpm(), alg::kSha256, 16);
  ASSERT_TRUE(before.ok() && sha256_before.ok());
  Bytes d(20, 0x11);
  ASSERT_TRUE(pcr_extend(tpm(), alg::kSha1, 16, d).ok());
  auto v = pcr_read(tpm(), alg::kSha1, 16);
  ASSERT_TRUE(v.ok());
  // SHA-1(old || digest), and the sha256 bank untouched.
  auto expected = pcr_extended_value(alg::kSha1, *before, d);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(to_hex(*v), to_hex(*expected));
  EXPECT_EQ(*pcr_read(tpm(), alg::kSha256, 16), *sha256_before);
}

TEST_P(PcrTest, WrongDigestLengthRefusedBeforeTheTpm) {
  Status st = pcr_extend(tpm(), alg::kSha256, 16, Bytes(31, 1));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kUsage);
  EXPECT_EQ(st.error().message(), "digest must be 32 bytes for sha256, got 31");
}

TEST_P(PcrTest, ResettingAPlatformPcrIsATpmError) {
  Status st = pcr_reset(tpm(), 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kTpm);
  EXPECT_NE(st.error().message().find("TPM_RC_LOCALITY"), std::string::npos) << st.error().message();
}

TEST_P(PcrTest, CheckPcrNamesTheProblem) {
  auto info = read_tpm_info(tpm());
  ASSERT_TRUE(info.ok());
  Status st = check_pcr(*info, alg::kSha256, 24);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message(), "PCR 24 does not exist (this TPM has 24 PCRs)");
  EXPECT_TRUE(check_pcr(*info, alg::kSha256, 23).ok());
}

TEST_P(PcrTest, WrongPasswordOnPcrIsBadAuth) {
  // PCR authValue is empty; a wrong password is refused by the TPM.
  const uint8_t pw[] = {1, 2, 3};
  Status st = pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 1), Auth::password(pw));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kTpm);
  EXPECT_EQ(rc_base(st.error().tpm_rc()), rc::kBadAuth) << st.error().message();
}

TEST_P(PcrTest, GetRandomReturnsRequestedBytes) {
  cmd::GetRandom c{16};
  auto r = tpm().run(c);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->random_bytes.bytes.size(), 16u);
}

TEST_P(PcrTest, NullPrimaryContextSaveLoadFlush) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  Public& p = c.in_public.public_area;
  p.type = alg::kEcc;
  p.name_alg = alg::kSha256;
  p.attributes = 0x00030472;
  p.symmetric = SymDef::aes128_cfb();
  p.curve = curve::kNistP256;
  auto created = tpm().run(c, {Auth::password()});
  ASSERT_TRUE(created.ok()) << created.error().message();
  EXPECT_EQ(created->object_handle >> 24, 0x80u);
  EXPECT_EQ(created->out_public.public_area.unique_x.size(), 32u);
  auto saved = tpm().run(cmd::ContextSave{NamedHandle{created->object_handle, created->name.bytes}});
  ASSERT_TRUE(saved.ok()) << saved.error().message();
  ASSERT_TRUE(tpm().run(cmd::FlushContext{created->object_handle}).ok());
  auto loaded = tpm().run(cmd::ContextLoad{saved->context});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  ASSERT_TRUE(tpm().run(cmd::FlushContext{loaded->loaded_handle}).ok());
  // Nothing left behind.
  auto handles = tpm().run(cmd::GetCapability{cap::kHandles, ht::kFirstTransient, 64});
  ASSERT_TRUE(handles.ok());
  EXPECT_TRUE(handles->capability_data.handles.empty());
}

INSTANTIATE_TEST_SUITE_P(AllTransports, PcrTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
