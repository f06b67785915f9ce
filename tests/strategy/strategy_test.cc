// Lifecycle strategies on real TPMs: every strategy extends the same chain,
// the resident session survives what legitimately ends sessions, a TPM Reset
// fails closed unless allowed.
#include <openssl/sha.h>

#include "support/test_tpm.h"
#include "tpmsec/pcr.h"
#include "tpmsec/strategy.h"

namespace tpmsec {
namespace {

// The test's own TPM, nothing between: its first answer is the anchor.
StreamOptions own_tpm_options() {
  StreamOptions options;
  options.protection.trust_first_use = true;
  return options;
}

Bytes chain(Bytes value, const std::vector<Bytes>& digests) {
  for (const Bytes& d : digests) {
    Bytes in = value;
    in.insert(in.end(), d.begin(), d.end());
    value.assign(32, 0);
    SHA256(in.data(), in.size(), value.data());
  }
  return value;
}

std::vector<Bytes> digests(int n, uint8_t seed) {
  std::vector<Bytes> out;
  for (int i = 0; i < n; ++i) {
    Bytes d(32);
    for (int j = 0; j < 32; ++j) d[j] = static_cast<uint8_t>(seed * 31 + i * 7 + j);
    out.push_back(d);
  }
  return out;
}

struct Param {
  testing::TpmKind tpm;
  StrategyKind strategy;
};

class StrategyChainTest : public testing::TpmTest {};

TEST_P(StrategyChainTest, EveryStrategyExtendsTheIndependentChain) {
  for (StrategyKind kind : all_strategies()) {
    SCOPED_TRACE(std::string(strategy_name(kind)));
    ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
    StreamOptions options;
    options.protection.trust_first_use = true;  // the test's own TPM, nothing between
    options.checkpoint_every = 5;
    auto stream = ExtendStream::open(tpm(), kind, options);
    ASSERT_TRUE(stream.ok()) << stream.error().message();
    auto ds = digests(12, static_cast<uint8_t>(kind));
    for (const Bytes& d : ds) {
      Status st = (*stream)->extend(d);
      ASSERT_TRUE(st.ok()) << st.error().message();
    }
    ASSERT_TRUE((*stream)->finish().ok());
    Bytes expected = chain(Bytes(32, 0), ds);
    EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(expected));
    if (kind != StrategyKind::kPlain) EXPECT_EQ(to_hex((*stream)->expected()), to_hex(expected));
    EXPECT_EQ((*stream)->stats().extends, 12u);
    if (kind == StrategyKind::kCheckpoint) EXPECT_EQ((*stream)->stats().checkpoints, 3u);  // 5, 10, finish
    stream->reset();
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstTransient}) {
      auto h = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      ASSERT_TRUE(h.ok());
      EXPECT_TRUE(h->capability_data.handles.empty()) << std::hex << first;
    }
  }
}

TEST_P(StrategyChainTest, ResidentSurvivesAForeignFlush) {
  auto stream = ExtendStream::open(tpm(), StrategyKind::kResident, own_tpm_options());
  ASSERT_TRUE(stream.ok());
  auto ds = digests(6, 1);
  for (int i = 0; i < 6; ++i) {
    if (i == 3) {
      // Someone else flushes every loaded session (a resource manager evicting it).
      auto h = tpm().run(cmd::GetCapability{cap::kHandles, ht::kFirstHmacSession, 64});
      ASSERT_TRUE(h.ok());
      ASSERT_FALSE(h->capability_data.handles.empty());
      for (uint32_t s : h->capability_data.handles) ASSERT_TRUE(tpm().run(cmd::FlushContext{s}).ok());
    }
    Status st = (*stream)->extend(ds[i]);
    ASSERT_TRUE(st.ok()) << st.error().message();
  }
  EXPECT_GE((*stream)->stats().rebuilds, 1u);
  EXPECT_EQ((*stream)->stats().already_landed, 0u);
  EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(Bytes(32, 0), ds)));
}

// Suspend, resume and reset need platform control, which a device does not give.
class StrategyPlatformTest : public StrategyChainTest {};

TEST_P(StrategyPlatformTest, ResidentAndSavedContextSurviveSuspendResume) {
  for (StrategyKind kind : {StrategyKind::kResident, StrategyKind::kSavedContext, StrategyKind::kCheckpoint}) {
    SCOPED_TRACE(std::string(strategy_name(kind)));
    // PCR 15 is state-saved across Shutdown(STATE) (PCR 16 is not, on PC Client TPMs).
    StreamOptions options;
    options.protection.trust_first_use = true;  // the test's own TPM, nothing between
    options.pcr = 15;
    Bytes start = *pcr_read(tpm(), alg::kSha256, 15);
    auto stream = ExtendStream::open(tpm(), kind, options);
    ASSERT_TRUE(stream.ok()) << stream.error().message();
    auto ds = digests(4, 2);
    ASSERT_TRUE((*stream)->extend(ds[0]).ok());
    ASSERT_TRUE((*stream)->extend(ds[1]).ok());
    Status resumed = transport().suspend_resume();
    ASSERT_TRUE(resumed.ok()) << resumed.error().message();
    for (int i = 2; i < 4; ++i) {
      Status st = (*stream)->extend(ds[i]);
      ASSERT_TRUE(st.ok()) << st.error().message();
    }
    ASSERT_TRUE((*stream)->finish().ok());
    EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 15)), to_hex(chain(start, ds)));
    EXPECT_EQ((*stream)->stats().resets_accepted, 0u);
    EXPECT_EQ((*stream)->stats().already_landed, 0u);
    if (kind == StrategyKind::kResident) EXPECT_GE((*stream)->stats().rebuilds, 1u);
  }
}

TEST_P(StrategyPlatformTest, TpmResetFailsClosedUnlessAllowed) {
  for (bool allow : {false, true}) {
    SCOPED_TRACE(allow ? "allow-reset" : "default");
    StreamOptions options;
    options.protection.trust_first_use = true;  // the test's own TPM, nothing between
    options.allow_reset = allow;
    auto stream = ExtendStream::open(tpm(), StrategyKind::kResident, options);
    ASSERT_TRUE(stream.ok());
    ASSERT_TRUE((*stream)->extend(Bytes(32, 1)).ok());
    ASSERT_TRUE(transport().reset_tpm().ok());
    Status st = (*stream)->extend(Bytes(32, 2));
    if (!allow) {
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
      EXPECT_NE(st.error().message().find("null key name changed"), std::string::npos) << st.error().message();
    } else {
      ASSERT_TRUE(st.ok()) << st.error().message();
      EXPECT_EQ((*stream)->stats().resets_accepted, 1u);
      EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(Bytes(32, 0), {Bytes(32, 2)})));
    }
  }
}

TEST(StrategyNames, ParseAndPrint) {
  for (StrategyKind k : all_strategies()) EXPECT_EQ(*parse_strategy(strategy_name(k)), k);
  auto bad = parse_strategy("lazy");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kUsage);
}

INSTANTIATE_TEST_SUITE_P(AllTransports, StrategyChainTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);
INSTANTIATE_TEST_SUITE_P(PlatformTransports, StrategyPlatformTest, testing::platform_tpm_kinds(),
                         testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
