// Strategies against an interposer (the fault-injecting transport over the
// real embedded TPM): forged error codes never cause a double extend, not
// even with a withheld command replayed after a dropped FlushContext, and
// checkpoint catches dropped and substituted extends.
#include <openssl/sha.h>

#include "support/fault_injection.h"
#include "support/test_tpm.h"
#include "tpmsec/command_table.h"
#include "tpmsec/pcr.h"
#include "tpmsec/strategy.h"

namespace tpmsec {
namespace {

constexpr uint32_t kPcrExtend = 0x182;

Bytes chain(Bytes value, const std::vector<Bytes>& digests) {
  for (const Bytes& d : digests) value = *pcr_extended_value(alg::kSha256, value, d);
  return value;
}

std::vector<Bytes> digests(int n) {
  std::vector<Bytes> out;
  for (int i = 0; i < n; ++i) out.push_back(Bytes(32, static_cast<uint8_t>(0x40 + i)));
  return out;
}

// A successful PCR_Extend response with a password session: what an
// interposer answers when it drops the command.
Bytes forged_password_success() { return *from_hex("80020000001300000000000000000000010000"); }

class StrategyFaultTest : public testing::TpmTest {
 protected:
  void SetUp() override {
    testing::TpmTest::SetUp();
    faults_ = std::make_unique<FaultInjectingTransport>(transport());
    faulty_ = std::make_unique<Tpm>(*faults_);
  }
  // Applies `fault` to the `nth` PCR_Extend (0-based) sent through the interposer.
  void on_nth_extend(int nth, Fault fault) {
    auto seen = std::make_shared<int>(0);
    faults_->set_hook([=](size_t, uint32_t code, ByteView) {
      if (code == kPcrExtend && (*seen)++ == nth) return fault;
      return Fault::pass();
    });
  }
  std::unique_ptr<FaultInjectingTransport> faults_;
  std::unique_ptr<Tpm> faulty_;
};

struct ForgeCase {
  const char* name;
  Fault fault;
  bool landed;
};

TEST_P(StrategyFaultTest, ForgedErrorsNeverApplyAnExtendTwice) {
  const std::vector<ForgeCase> cases = {
      {"RETRY after execution", Fault::forge_error(0x922, true), true},
      {"REFERENCE_S0 after execution", Fault::forge_error(0x918, true), true},
      {"BAD_AUTH after execution", Fault::forge_error(0x9A2, true), true},
      {"transport failure after execution", Fault::fail(true), true},
      {"RETRY, not executed", Fault::forge_error(0x922, false), false},
      {"transport failure, not executed", Fault::fail(false), false},
  };
  for (StrategyKind kind :
       {StrategyKind::kPerCommand, StrategyKind::kSavedContext, StrategyKind::kResident, StrategyKind::kCheckpoint}) {
    for (const auto& c : cases) {
      SCOPED_TRACE(std::string(strategy_name(kind)) + ": " + c.name);
      ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
      faults_->set_hook(nullptr);
      StreamOptions options;
      options.protection.trust_first_use = true;  // behind the interposer
      options.checkpoint_every = 0;
      auto stream = ExtendStream::open(*faulty_, kind, options);
      ASSERT_TRUE(stream.ok()) << stream.error().message();
      on_nth_extend(2, c.fault);
      auto ds = digests(5);
      bool stopped = false;
      for (size_t i = 0; i < ds.size(); ++i) {
        Status st = (*stream)->extend(ds[i]);
        if (st.ok()) continue;
        // A session whose first command the TPM (apparently) rejected for
        // its HMAC or handle came from an unauthenticated StartAuthSession
        // answer: tpmsec stops as for tampering instead of retrying. Then
        // too, the digest landed at most once.
        ASSERT_EQ(st.error().kind(), ErrorKind::kIntegrity) << st.error().message();
        ASSERT_TRUE(c.fault.forged_response.has_value()) << "only a forged answer stops the stream";
        std::vector<Bytes> applied(ds.begin(), ds.begin() + i + (c.landed ? 1 : 0));
        EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(Bytes(32, 0), applied)));
        stopped = true;
        break;
      }
      if (!stopped) {
        ASSERT_TRUE((*stream)->finish().ok());
        // Every digest exactly once.
        EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(Bytes(32, 0), ds)));
        EXPECT_EQ((*stream)->stats().landed_checks, 1u);
        EXPECT_EQ((*stream)->stats().already_landed, c.landed ? 1u : 0u);
      }
      stream->reset();
      for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstTransient}) {
        auto h = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
        ASSERT_TRUE(h.ok());
        EXPECT_TRUE(h->capability_data.handles.empty()) << std::hex << first;
      }
    }
  }
}

TEST_P(StrategyFaultTest, CheckpointCatchesADroppedExtendAndMarksThePcr) {
  ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
  StreamOptions options;
  options.protection.trust_first_use = true;  // behind the interposer
  options.checkpoint_every = 4;
  auto stream = ExtendStream::open(*faulty_, StrategyKind::kCheckpoint, options);
  ASSERT_TRUE(stream.ok());
  Fault drop;
  drop.execute = false;
  drop.forged_response = forged_password_success();
  on_nth_extend(5, drop);  // in the second window
  auto ds = digests(8);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*stream)->extend(ds[i]).ok()) << i;
  Status st = (*stream)->extend(ds[7]);  // the 8th extend triggers the checkpoint
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(st.error().message().find("checkpoint mismatch on PCR 16"), std::string::npos) << st.error().message();
  const CheckpointMismatch* m = (*stream)->mismatch();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->extends_since_good, 4u);
  EXPECT_EQ(to_hex(m->expected), to_hex(chain(Bytes(32, 0), ds)));
  std::vector<Bytes> landed(ds.begin(), ds.end());
  landed.erase(landed.begin() + 5);
  EXPECT_EQ(to_hex(m->actual), to_hex(chain(Bytes(32, 0), landed)));
  // The marker went in through a protected session: the PCR can never match the log.
  EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(m->actual, {m->marker})));
  // The stream refuses to go on.
  EXPECT_EQ((*stream)->extend(ds[0]).error().kind(), ErrorKind::kIntegrity);
}

TEST_P(StrategyFaultTest, CheckpointCatchesASubstitutedDigest) {
  ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
  StreamOptions options;
  options.protection.trust_first_use = true;  // behind the interposer
  options.checkpoint_every = 0;               // only at finish
  auto stream = ExtendStream::open(*faulty_, StrategyKind::kCheckpoint, options);
  ASSERT_TRUE(stream.ok());
  auto seen = std::make_shared<int>(0);
  faults_->set_hook([seen](size_t, uint32_t code, ByteView command) {
    // Flip the last byte of the digest of the second extend: password
    // authorization does not protect it, so the TPM accepts it.
    if (code == kPcrExtend && (*seen)++ == 1) return Fault::flip_command(command.size() - 1, 0x01);
    return Fault::pass();
  });
  auto ds = digests(3);
  for (const Bytes& d : ds) ASSERT_TRUE((*stream)->extend(d).ok());
  Status st = (*stream)->finish();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
  ASSERT_NE((*stream)->mismatch(), nullptr);
  EXPECT_EQ((*stream)->mismatch()->extends_since_good, 3u);
}

TEST_P(StrategyFaultTest, ProtectedStrategiesRejectASubstitutedDigest) {
  for (StrategyKind kind : {StrategyKind::kPerCommand, StrategyKind::kSavedContext, StrategyKind::kResident}) {
    SCOPED_TRACE(std::string(strategy_name(kind)));
    ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
    faults_->set_hook(nullptr);
    StreamOptions options;
    options.protection.trust_first_use = true;  // behind the interposer
    auto stream = ExtendStream::open(*faulty_, kind, options);
    ASSERT_TRUE(stream.ok());
    // Every PCR_Extend gets its digest flipped: the TPM's HMAC check refuses
    // it. tpmsec computed that HMAC with keys only it and the TPM know, so
    // the refusal means the command was altered: an integrity failure.
    faults_->set_hook([](size_t, uint32_t code, ByteView command) {
      return code == kPcrExtend ? Fault::flip_command(command.size() - 1, 0x01) : Fault::pass();
    });
    Status st = (*stream)->extend(Bytes(32, 1));
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity) << st.error().message();
    faults_->set_hook(nullptr);
    EXPECT_EQ(*pcr_read(tpm(), alg::kSha256, 16), Bytes(32, 0));  // nothing landed
  }
}

// Every ContextLoad of the saved-context session answered with a forged
// TPM_RC_RETRY, after the TPM loaded it or without sending it: each time
// the session is flushed (loaded or saved, it is still the stream's) and
// rebuilt, so the stream keeps going and holds one session at most.
TEST_P(StrategyFaultTest, SavedContextSurvivesForgedRetriesOnEveryContextLoad) {
  for (bool executed : {true, false}) {
    SCOPED_TRACE(executed ? "after execution" : "not sent");
    ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
    faults_->set_hook(nullptr);
    StreamOptions options;
    options.protection.trust_first_use = true;  // behind the interposer
    auto stream = ExtendStream::open(*faulty_, StrategyKind::kSavedContext, options);
    ASSERT_TRUE(stream.ok()) << stream.error().message();
    auto forged = std::make_shared<int>(0);
    faults_->set_hook([forged, executed](size_t, uint32_t code, ByteView command) {
      // ContextLoad of a session: TPMS_CONTEXT.savedHandle (after the 8-byte sequence) is a session handle.
      if (code != cc::kContextLoad || command.size() < 22 || command[18] != ht::kHmacSession) {
        return Fault::pass();
      }
      ++*forged;
      return Fault::forge_error(rc::kRetry, executed);
    });
    auto ds = digests(12);
    for (size_t i = 0; i < ds.size(); ++i) {
      Status st = (*stream)->extend(ds[i]);
      ASSERT_TRUE(st.ok()) << "extend " << i << ": " << st.error().message();
      size_t sessions = 0;
      for (uint32_t first : {ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
        auto h = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
        ASSERT_TRUE(h.ok());
        sessions += h->capability_data.handles.size();
      }
      EXPECT_LE(sessions, 1u) << "after extend " << i;
    }
    EXPECT_EQ(*forged, 11);  // every extend after the first
    EXPECT_EQ((*stream)->stats().extends, 12u);
    ASSERT_TRUE((*stream)->finish().ok());
    EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(Bytes(32, 0), ds)));
    faults_->set_hook(nullptr);
    stream->reset();
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstSavedSession, ht::kFirstTransient}) {
      auto h = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      ASSERT_TRUE(h.ok());
      EXPECT_TRUE(h->capability_data.handles.empty()) << std::hex << first;
    }
  }
}

// The attack on a retry: an interposer withholds a protected PCR_Extend,
// answers it with a forged error, answers the FlushContext of its session
// with a forged success without sending it, and replays the withheld command
// once the stream has extended the digest again. The session is still in the
// TPM and the command's HMAC still matches its nonce, so the TPM would accept
// it: the stream must prove the session gone (an audited listing) before it
// retries, and refuse to retry while it is not.
struct WithheldExtend {
  int nth = 2;              // which PCR_Extend to withhold
  int flushes_to_drop = 1;  // of its session; -1: every one
  int extends_seen = 0;
  std::optional<Bytes> command;
  uint32_t session = 0;
  int flushes_dropped = 0;
};

constexpr uint32_t kFlushContext = 0x165;

Fault withhold(WithheldExtend& a, uint32_t code, ByteView command) {
  if (code == kPcrExtend && a.extends_seen++ == a.nth) {
    a.command = Bytes(command.begin(), command.end());
    a.session = load_be32(command.data() + 18);            // header, pcrHandle, authorizationSize, sessionHandle
    return Fault::forge_error(0x922, /*executed=*/false);  // TPM_RC_RETRY
  }
  if (code == kFlushContext && a.command && load_be32(command.data() + 10) == a.session &&
      (a.flushes_to_drop < 0 || a.flushes_dropped < a.flushes_to_drop)) {
    ++a.flushes_dropped;
    Fault drop;
    drop.execute = false;
    drop.forged_response = error_response(0);  // TPM_RC_SUCCESS
    return drop;
  }
  return Fault::pass();
}

TEST_P(StrategyFaultTest, AWithheldExtendIsNeverAppliedTwice) {
  for (StrategyKind kind : {StrategyKind::kPerCommand, StrategyKind::kSavedContext, StrategyKind::kResident}) {
    SCOPED_TRACE(std::string(strategy_name(kind)));
    ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
    faults_->set_hook(nullptr);
    StreamOptions options;
    options.protection.trust_first_use = true;  // the test's interposer leaves the null key alone
    auto stream = ExtendStream::open(*faulty_, kind, options);
    ASSERT_TRUE(stream.ok()) << stream.error().message();
    auto attack = std::make_shared<WithheldExtend>();
    faults_->set_hook([attack](size_t, uint32_t code, ByteView command) { return withhold(*attack, code, command); });
    auto ds = digests(5);
    for (const Bytes& d : ds) {
      Status st = (*stream)->extend(d);
      ASSERT_TRUE(st.ok()) << st.error().message();
    }
    ASSERT_TRUE(attack->command.has_value());
    EXPECT_EQ(attack->flushes_dropped, 1);
    EXPECT_EQ((*stream)->stats().reflushes, 1u);  // the audited listing still showed the session
    EXPECT_EQ((*stream)->stats().already_landed, 0u);
    EXPECT_EQ((*stream)->stats().rebuilds, 1u);
    // The replay, straight to the TPM.
    auto replayed = faults_->inner().transmit(*attack->command);
    ASSERT_TRUE(replayed.ok());
    ASSERT_GE(replayed->size(), 10u);
    EXPECT_NE(load_be32(replayed->data() + 6), 0u) << "the TPM accepted the withheld PCR_Extend";
    ASSERT_TRUE((*stream)->finish().ok());
    EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(Bytes(32, 0), ds)));
    faults_->set_hook(nullptr);
    stream->reset();
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstPolicySession, ht::kFirstTransient}) {
      auto h = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      ASSERT_TRUE(h.ok());
      EXPECT_TRUE(h->capability_data.handles.empty()) << std::hex << first;
    }
  }
}

// The same interposer drops every FlushContext of the withheld command's
// session: the stream cannot prove it gone, so it does not retry. The
// replay then lands the digest: once.
TEST_P(StrategyFaultTest, AnUnflushableSessionStopsTheRetry) {
  for (StrategyKind kind : {StrategyKind::kPerCommand, StrategyKind::kSavedContext, StrategyKind::kResident}) {
    SCOPED_TRACE(std::string(strategy_name(kind)));
    ASSERT_TRUE(pcr_reset(tpm(), 16).ok());
    faults_->set_hook(nullptr);
    StreamOptions options;
    options.protection.trust_first_use = true;  // the test's interposer leaves the null key alone
    auto stream = ExtendStream::open(*faulty_, kind, options);
    ASSERT_TRUE(stream.ok()) << stream.error().message();
    auto attack = std::make_shared<WithheldExtend>();
    attack->flushes_to_drop = -1;
    faults_->set_hook([attack](size_t, uint32_t code, ByteView command) { return withhold(*attack, code, command); });
    auto ds = digests(3);
    ASSERT_TRUE((*stream)->extend(ds[0]).ok());
    ASSERT_TRUE((*stream)->extend(ds[1]).ok());
    Status st = (*stream)->extend(ds[2]);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
    EXPECT_NE(st.error().message().find("still in the TPM"), std::string::npos) << st.error().message();
    EXPECT_EQ((*stream)->stats().rebuilds, 0u);
    EXPECT_EQ(*pcr_read(tpm(), alg::kSha256, 16), chain(Bytes(32, 0), {ds[0], ds[1]}));
    auto replayed = faults_->inner().transmit(*attack->command);
    ASSERT_TRUE(replayed.ok());
    EXPECT_EQ(load_be32(replayed->data() + 6), 0u) << "the session was alive: the replay lands";
    EXPECT_EQ(to_hex(*pcr_read(tpm(), alg::kSha256, 16)), to_hex(chain(Bytes(32, 0), ds)));
    faults_->set_hook(nullptr);
    stream->reset();
    // The session the interposer kept alive is the one leak it can cause.
    auto h = tpm().run(cmd::GetCapability{cap::kHandles, ht::kFirstHmacSession, 64});
    ASSERT_TRUE(h.ok());
    for (uint32_t s : h->capability_data.handles) (void)tpm().run(cmd::FlushContext{s});
  }
}

INSTANTIATE_TEST_SUITE_P(Embedded, StrategyFaultTest, ::testing::Values(testing::TpmKind::kEmbedded),
                         testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
