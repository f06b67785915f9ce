// Protected commands against the reference TPM over every transport: the TPM
// accepts our HMACs, we verify its responses, and parameter encryption
// round-trips.
#include <openssl/sha.h>

#include <algorithm>

#include "support/test_tpm.h"
#include "testing/transport_doubles.h"
#include "tpmsec/pcr.h"
#include "tpmsec/session_factory.h"

namespace tpmsec {
namespace {

class SessionLiveTest : public testing::TpmTest {
 protected:
  std::unique_ptr<SessionFactory> factory(ProtectionConfig config = {}) {
    // The test's own TPM, nothing between: its first answer is the anchor.
    if (!config.pinned_null_name) config.trust_first_use = true;
    auto f = SessionFactory::create(tpm(), config);
    EXPECT_TRUE(f.ok()) << f.error().message();
    return f.ok() ? std::move(*f) : nullptr;
  }
  void expect_no_handles_left() {
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstTransient}) {
      auto r = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      ASSERT_TRUE(r.ok());
      EXPECT_TRUE(r->capability_data.handles.empty()) << std::hex << first;
    }
  }
};

Bytes sha256(ByteView a, ByteView b = {}) {
  Bytes in(a.begin(), a.end());
  in.insert(in.end(), b.begin(), b.end());
  Bytes out(32);
  SHA256(in.data(), in.size(), out.data());
  return out;
}

TEST_P(SessionLiveTest, ProtectedExtendsChainLikePlainOnes) {
  auto f = factory();
  ASSERT_TRUE(f);
  Bytes expected(32, 0);
  for (int i = 0; i < 4; ++i) {
    auto s = f->start(0);  // one-shot, as Linux 6.10
    ASSERT_TRUE(s.ok()) << s.error().message();
    Bytes d(32, static_cast<uint8_t>(i + 1));
    Status st = pcr_extend(tpm(), alg::kSha256, 16, d, Auth{s->get(), {}});
    ASSERT_TRUE(st.ok()) << st.error().message();
    EXPECT_FALSE((*s)->usable());  // the TPM ended it
    expected = sha256(expected, d);
  }
  EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(expected));
  expect_no_handles_left();
}

TEST_P(SessionLiveTest, ContinuedSessionRollsNonces) {
  auto f = factory();
  auto s = f->start(attr::kContinueSession);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 5; ++i) {
    Bytes before((*s)->nonce_tpm().begin(), (*s)->nonce_tpm().end());
    ASSERT_TRUE(pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 7), Auth{s->get(), {}}).ok());
    EXPECT_NE(Bytes((*s)->nonce_tpm().begin(), (*s)->nonce_tpm().end()), before);
  }
  ASSERT_TRUE((*s)->flush().ok());
  expect_no_handles_left();
}

// Two commands whose responses carry no parameters, in turn on one session:
// the rpHash the session keeps for one (H(rc || cc)) must never serve the other.
TEST_P(SessionLiveTest, ParameterlessResponsesOfTwoCommandsInTurnVerify) {
  auto f = factory();
  auto s = f->start(attr::kContinueSession);
  ASSERT_TRUE(s.ok()) << s.error().message();
  for (int i = 0; i < 3; ++i) {
    Status st = pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 7), Auth{s->get(), {}});
    ASSERT_TRUE(st.ok()) << st.error().message();
    st = pcr_reset(tpm(), 16, Auth{s->get(), {}});
    ASSERT_TRUE(st.ok()) << st.error().message();
  }
  EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(Bytes(32, 0)));
  ASSERT_TRUE((*s)->flush().ok());
}

// The bytes the caller gets are not the bytes the TPM sent: the response's
// first parameter crossed the bus encrypted, with either cipher.
TEST_P(SessionLiveTest, GetRandomEncryptedWithAesAndXor) {
  for (SymDef sym : {SymDef::aes128_cfb(), SymDef::xor_with(alg::kSha256)}) {
    Bytes last_response;
    testing::InterposingTransport bus(transport(), [&](ByteView c, Transport& inner) {
      auto r = inner.transmit(c);
      if (r.ok()) last_response = *r;
      return r;
    });
    Tpm on_bus(bus);
    ProtectionConfig config;
    config.symmetric = sym;
    config.trust_first_use = true;
    auto f = SessionFactory::create(on_bus, config);
    ASSERT_TRUE(f.ok()) << f.error().message();
    auto s = (*f)->start(attr::kEncrypt);
    ASSERT_TRUE(s.ok()) << s.error().message();
    auto r = on_bus.run(cmd::GetRandom{32}, {Auth{s->get(), {}}});
    ASSERT_TRUE(r.ok()) << r.error().message();
    const Bytes& got = r->random_bytes.bytes;
    ASSERT_EQ(got.size(), 32u);
    // Response: header, parameterSize, then the TPM2B: its 32 bytes as sent.
    ASSERT_GE(last_response.size(), 10u + 4 + 2 + 32);
    Bytes sent(last_response.begin() + 16, last_response.begin() + 48);
    EXPECT_NE(sent, got) << "sent in clear with " << (sym.algorithm == alg::kAes ? "AES" : "XOR");
    EXPECT_EQ(std::search(last_response.begin(), last_response.end(), got.begin(), got.end()), last_response.end());
    ASSERT_TRUE((*s)->flush().ok());
  }
  expect_no_handles_left();
}

TEST_P(SessionLiveTest, HashWithDecryptAndEncrypt) {
  auto f = factory();
  auto s = f->start(attr::kDecrypt | attr::kEncrypt | attr::kContinueSession);
  ASSERT_TRUE(s.ok());
  const std::string text = "the quick brown fox jumps over the lazy dog";
  cmd::Hash c;
  c.data.bytes.assign(text.begin(), text.end());
  auto r = tpm().run(c, {Auth{s->get(), {}}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->out_hash.bytes, sha256(as_bytes(text)));
  // And again, on the rolled nonces.
  r = tpm().run(c, {Auth{s->get(), {}}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->out_hash.bytes, sha256(as_bytes(text)));
}

TEST_P(SessionLiveTest, AuditedPcrReadVerifies) {
  ASSERT_TRUE(pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 9)).ok());
  auto f = factory();
  auto s = f->start(attr::kAudit | attr::kContinueSession);
  ASSERT_TRUE(s.ok());
  Auth audit{s->get(), {}};
  auto v = pcr_read(tpm(), alg::kSha256, 16, std::span<const Auth>(&audit, 1));
  ASSERT_TRUE(v.ok()) << v.error().message();
  EXPECT_EQ(*v, sha256(Bytes(32, 0), Bytes(32, 9)));
}

TEST_P(SessionLiveTest, RsaSaltedSession) {
  ProtectionConfig config;
  config.salt = SaltKind::kRsa;
  auto f = factory(config);
  ASSERT_TRUE(f);
  auto s = f->start(0);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_TRUE(pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 3), Auth{s->get(), {}}).ok());
  expect_no_handles_left();
}

TEST_P(SessionLiveTest, EncryptOnACommandThatCannotCarryItIsAnApiError) {
  auto f = factory();
  auto s = f->start(attr::kEncrypt | attr::kContinueSession);
  ASSERT_TRUE(s.ok());
  Status st = pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 3), Auth{s->get(), {}});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(st.error().message().find("cannot carry response parameter encryption"), std::string::npos);
}

TEST_P(SessionLiveTest, PinnedNameMismatchFailsClosed) {
  ProtectionConfig config;
  config.pinned_null_name = Bytes(34, 0);
  config.pinned_null_name->at(1) = 0x0b;
  auto f = SessionFactory::create(tpm(), config);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().kind(), ErrorKind::kIntegrity);
  expect_no_handles_left();
}

// Resets need platform control, which a device does not give.
class SessionLivePlatformTest : public SessionLiveTest {};

TEST_P(SessionLivePlatformTest, TpmResetBetweenCommandsIsAnIntegrityFailure) {
  auto f = factory();
  ASSERT_TRUE(f);
  std::string pinned = f->null_key()->name_hex();
  auto s = f->start(0);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 1), Auth{s->get(), {}}).ok());
  ASSERT_TRUE(transport().reset_tpm().ok());
  auto again = f->start(0);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(again.error().message().find(pinned), std::string::npos) << again.error().message();
  // Only an explicit re-pin accepts the new key.
  ASSERT_TRUE(f->repin().ok());
  EXPECT_NE(f->null_key()->name_hex(), pinned);
  auto after = f->start(0);
  ASSERT_TRUE(after.ok()) << after.error().message();
  ASSERT_TRUE(pcr_extend(tpm(), alg::kSha256, 16, Bytes(32, 1), Auth{after->get(), {}}).ok());
  expect_no_handles_left();
}

INSTANTIATE_TEST_SUITE_P(AllTransports, SessionLiveTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);
INSTANTIATE_TEST_SUITE_P(PlatformTransports, SessionLivePlatformTest, testing::platform_tpm_kinds(),
                         testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
