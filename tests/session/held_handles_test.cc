// What a dead front end left on the TPM, and only that, is flushed by the
// next start (tpmsec/held_handles.h); the records follow what a Tpm holds.
// Against the real TPM (swtpm, the device transport), with the host state in
// memory: the test says which processes run. "Somebody else" (a running
// process, another program) is the test's own Tpm, on the same connection.
#include <gtest/gtest.h>

#include <set>

#include "support/test_tpm.h"
#include "testing/memory_host_state.h"
#include "testing/transport_doubles.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/held_handles.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

const ProcessStamp kDead{2000, 7, 1};  // not among MemoryHostState's running processes
const ProcessStamp kSelf{1000, 1, 1};  // MemoryHostState's this_process(), running

// A GetCapability(TPM_CAP_HANDLES) response listing `handles` (Part 3 §30.2):
// what an interposer answers instead of the TPM.
Bytes handle_listing(const std::vector<uint32_t>& handles) {
  Writer w;
  w.u16(st::kNoSessions);
  w.u32(static_cast<uint32_t>(10 + 1 + 4 + 4 + 4 * handles.size()));
  w.u32(rc::kSuccess);
  w.u8(0);  // moreData
  w.u32(cap::kHandles);
  w.u32(static_cast<uint32_t>(handles.size()));
  for (uint32_t h : handles) w.u32(h);
  return *w.finish();
}

class HeldHandlesTest : public testing::TpmTest {
 protected:
  void SetUp() override {
    TpmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    bus_ = std::make_unique<testing::InterposingTransport>(transport(), [this](ByteView c, Transport& inner) {
      uint32_t code = testing::command_code_of(c);
      if (code == cc::kFlushContext && c.size() >= 14) flushed_.push_back(load_be32(c.data() + 10));
      if (code == cc::kGetCapability && forged_listing_) return Result<Bytes>(handle_listing(*forged_listing_));
      sent_.push_back(code);
      return inner.transmit(c);
    });
    next_ = std::make_unique<Tpm>(*bus_);
    id_ = TpmId::of(transport().describe());
  }
  void TearDown() override {
    next_.reset();
    bus_.reset();
    TpmTest::TearDown();
  }

  // A session somebody started and left loaded.
  uint32_t session() {
    cmd::StartAuthSession c;
    c.nonce_caller.bytes = Bytes(32, static_cast<uint8_t>(++sessions_));
    auto r = tpm().run(c);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? r->session_handle : 0;
  }
  void record(ProcessStamp owner, uint64_t context, std::vector<HeldHandle> handles, std::string boot = "boot-1") {
    ASSERT_TRUE(host_.put_held_handles(id_, {owner, context, std::move(boot), std::move(handles)}).ok());
  }
  // The sessions the TPM lists, loaded or saved, as slots.
  std::set<uint32_t> sessions_in_tpm() {
    std::set<uint32_t> out;
    for (uint32_t first : {ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
      auto r = tpm().list_handles(first);
      EXPECT_TRUE(r.ok()) << r.error().message();
      if (r.ok()) {
        for (uint32_t h : *r) out.insert(HandleLedger::slot(h));
      }
    }
    return out;
  }
  Result<StaleHandles> next_start() { return flush_stale_handles(*next_, host_, id_, "boot-1"); }

  testing::MemoryHostState host_;
  TpmId id_;
  std::unique_ptr<testing::InterposingTransport> bus_;
  std::unique_ptr<Tpm> next_;  // the next process's Tpm: a ledger of its own
  std::optional<std::vector<uint32_t>> forged_listing_;
  std::vector<uint32_t> flushed_;  // FlushContext's handles, as sent by next_
  std::vector<uint32_t> sent_;     // what reached the TPM from next_
  int sessions_ = 0;
};

TEST_P(HeldHandlesTest, ADeadProcessesSessionAndKeyAreFlushedAndItsRecordGoes) {
  uint32_t mine = session();
  cmd::CreatePrimary primary;
  primary.primary_handle = NamedHandle::of(rh::kNull);
  primary.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto key = tpm().run(primary, {Auth::password()});
  ASSERT_TRUE(key.ok()) << key.error().message();
  record(kDead, 1, {{mine, false}, {key->object_handle, false}});
  auto done = next_start();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(done->records, 1u);
  EXPECT_EQ(flushed_, (std::vector<uint32_t>{mine, key->object_handle}));
  EXPECT_EQ(sessions_in_tpm(), std::set<uint32_t>{});
  EXPECT_FALSE(tpm().run(cmd::ReadPublic{NamedHandle::of(key->object_handle)}).ok());
  EXPECT_TRUE(host_.held_handles(id_).empty());
}

// A running process's record, and a handle in no record (another program's
// leak), are left alone, whoever else's record is stale.
TEST_P(HeldHandlesTest, OnlyWhatADeadProcessRecordedIsFlushed) {
  uint32_t live = session(), unrecorded = session(), dead = session();
  record(kSelf, 1, {{live, false}});
  record(kDead, 2, {{dead, false}});
  auto done = next_start();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(flushed_, std::vector<uint32_t>{dead});
  EXPECT_EQ(sessions_in_tpm(), (std::set<uint32_t>{live, unrecorded}));
  auto left = host_.held_handles(id_);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].owner, kSelf);
}

// The listing is unauthenticated: one that names every session and object
// (forged) still makes it flush only what the dead record names.
TEST_P(HeldHandlesTest, AForgedListingFlushesNothingADeadRecordDoesNotName) {
  uint32_t live = session(), unrecorded = session(), dead = session();
  record(kSelf, 1, {{live, false}});
  record(kDead, 2, {{dead, false}});
  forged_listing_ = std::vector<uint32_t>{live, unrecorded, dead, 0x02000010, 0x80000000, 0x80000001};
  auto done = next_start();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(flushed_, std::vector<uint32_t>{dead});
  EXPECT_EQ(sessions_in_tpm(), (std::set<uint32_t>{live, unrecorded}));
}

// A record names a session loaded; the TPM lists that number as saved (the
// dead one's was flushed and somebody saved another under it): left alone,
// and the record goes. The same the other way round.
TEST_P(HeldHandlesTest, AHandleInAnotherStateThanRecordedIsLeftAlone) {
  uint32_t saved = session();
  auto context = tpm().run(cmd::ContextSave{NamedHandle::of(saved)});
  ASSERT_TRUE(context.ok()) << context.error().message();
  uint32_t loaded = session();
  record(kDead, 1, {{saved, false}});
  record(kDead, 2, {{loaded, true}});
  auto done = next_start();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(done->records, 2u);
  EXPECT_EQ(flushed_, std::vector<uint32_t>{});
  EXPECT_EQ(sessions_in_tpm(), (std::set<uint32_t>{saved, loaded}));
  EXPECT_TRUE(host_.held_handles(id_).empty());
}

// A saved session the dead process recorded saved is flushed (FlushContext
// takes a saved session's handle).
TEST_P(HeldHandlesTest, ADeadProcessesSavedSessionIsFlushed) {
  uint32_t saved = session();
  ASSERT_TRUE(tpm().run(cmd::ContextSave{NamedHandle::of(saved)}).ok());
  record(kDead, 1, {{saved, true}});
  auto done = next_start();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(flushed_, std::vector<uint32_t>{saved});
  EXPECT_EQ(sessions_in_tpm(), std::set<uint32_t>{});
}

// A record of another boot: the TPM was reset since, and the number may be
// anybody's now. Removed, nothing flushed.
TEST_P(HeldHandlesTest, ARecordOfAnotherBootIsDroppedUnflushed) {
  uint32_t theirs = session();
  record(kDead, 1, {{theirs, false}}, "boot-0");
  auto done = next_start();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(done->records, 1u);
  EXPECT_EQ(sent_, std::vector<uint32_t>{});
  EXPECT_EQ(sessions_in_tpm(), std::set<uint32_t>{theirs});
}

// A normal start pays nothing on the TPM: no stale record, no command.
TEST_P(HeldHandlesTest, NothingIsSentWithoutAStaleRecord) {
  record(kSelf, 1, {{session(), false}});
  auto done = next_start();
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(sent_, std::vector<uint32_t>{});
  EXPECT_EQ(host_.held_handles(id_).size(), 1u);
}

// The record follows what the Tpm holds: a session started (loaded), saved,
// loaded back; gone from the record once flushed, and the record with it.
TEST_P(HeldHandlesTest, TheRecordFollowsWhatTheTpmHolds) {
  ASSERT_TRUE(track_held_handles(*next_, std::shared_ptr<HostState>(&host_, [](HostState*) {}), id_, "boot-1").ok());
  auto held = [&]() -> std::vector<HeldHandle> {
    auto records = host_.held_handles(id_);
    if (records.empty()) return {};
    EXPECT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].owner, kSelf);
    EXPECT_EQ(records[0].boot, "boot-1");
    return records[0].handles;
  };
  SessionOptions options;
  options.attributes = attr::kContinueSession;
  auto s = HmacSession::start(*next_, options);
  ASSERT_TRUE(s.ok()) << s.error().message();
  uint32_t h = (*s)->handle();
  EXPECT_EQ(held(), (std::vector<HeldHandle>{{h, false}}));
  auto context = (*s)->save(*next_);
  ASSERT_TRUE(context.ok()) << context.error().message();
  EXPECT_EQ(held(), (std::vector<HeldHandle>{{h, true}}));
  ASSERT_TRUE((*s)->load(*next_, *context).ok());
  EXPECT_EQ(held(), (std::vector<HeldHandle>{{h, false}}));
  ASSERT_TRUE((*s)->flush().ok());
  EXPECT_EQ(held(), std::vector<HeldHandle>{});
  EXPECT_TRUE(host_.held_handles(id_).empty());
}

INSTANTIATE_TEST_SUITE_P(OverABus, HeldHandlesTest,
                         ::testing::Values(testing::TpmKind::kSwtpm, testing::TpmKind::kDevice),
                         testing::tpm_kind_param_name);

// In process, nothing outlives the process: a stale record goes, nothing is
// listed or flushed.
TEST(HeldHandlesInProcess, AStaleRecordIsDroppedAndNothingSent) {
  auto t = open_embedded();
  ASSERT_TRUE(t.ok()) << t.error().message();
  testing::RecordingTransport bus(**t);
  Tpm tpm(bus);
  testing::MemoryHostState host;
  TpmId id = TpmId::of(bus.describe());
  ASSERT_TRUE(host.put_held_handles(id, {kDead, 1, "boot-1", {{0x02000000, false}}}).ok());
  auto done = flush_stale_handles(tpm, host, id, "boot-1");
  ASSERT_TRUE(done.ok()) << done.error().message();
  EXPECT_EQ(done->records, 1u);
  EXPECT_EQ(bus.codes(), std::vector<uint32_t>{});
  EXPECT_TRUE(host.held_handles(id).empty());
}

}  // namespace
}  // namespace tpmsec
