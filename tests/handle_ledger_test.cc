// The handle ledger (tpmsec/handle_ledger.h): which handles a Tpm may flush.
//
// HandleLedgerRules checks the bookkeeping alone. The live tests put the
// fault-injecting transport between tpmsec and the real TPM as an attacker
// who forges the responses of creating commands or loses them, and check
// with GetCapability, through a Tpm the attacker cannot touch, that no
// handle but the ones tpmsec created is ever flushed and none is left.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/test_tpm.h"
#include "tpmsec/fault_injection.h"
#include "tpmsec/handle_ledger.h"
#include "tpmsec/null_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/session_factory.h"

namespace tpmsec {
namespace {

constexpr CreatedHandle kTransient{ht::kTransient};
constexpr CreatedHandle kHmacSession{ht::kHmacSession};

TEST(HandleLedgerRules, AdoptsANewHandleOfTheExpectedType) {
  HandleLedger ledger;
  ledger.set_baseline({});
  ASSERT_TRUE(ledger.adopt("CreatePrimary", kTransient, 0x80000000).ok());
  EXPECT_TRUE(ledger.owns(0x80000000));
  EXPECT_EQ(ledger.owned_count(), 1u);
  ledger.forget(0x80000000);
  EXPECT_FALSE(ledger.owns(0x80000000));
}

TEST(HandleLedgerRules, RefusesAHandleAlreadyInUse) {
  HandleLedger ledger;
  const uint32_t before[] = {0x80000001, 0x02000003};
  ledger.set_baseline(before);
  ASSERT_TRUE(ledger.adopt("StartAuthSession", kHmacSession, 0x02000000).ok());
  // Our own live session.
  Status own = ledger.adopt("StartAuthSession", kHmacSession, 0x02000000);
  ASSERT_FALSE(own.ok());
  EXPECT_EQ(own.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(own.error().message().find("0x02000000 already in use"), std::string::npos) << own.error().message();
  // Somebody else's object and (saved) session.
  EXPECT_EQ(ledger.adopt("CreatePrimary", kTransient, 0x80000001).error().kind(), ErrorKind::kIntegrity);
  EXPECT_EQ(ledger.adopt("StartAuthSession", kHmacSession, 0x02000003).error().kind(), ErrorKind::kIntegrity);
  EXPECT_FALSE(ledger.owns(0x80000001));
  EXPECT_FALSE(ledger.owns(0x02000003));
  EXPECT_EQ(ledger.owned_count(), 1u);
}

TEST(HandleLedgerRules, RefusesTheWrongType) {
  HandleLedger ledger;
  ledger.set_baseline({});
  for (uint32_t h : {0x40000001u, 0x81000001u, 0x01c00002u, 0x02000000u}) {
    Status st = ledger.adopt("CreatePrimary", kTransient, h);
    ASSERT_FALSE(st.ok()) << std::hex << h;
    EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity);
  }
  EXPECT_FALSE(ledger.adopt("StartAuthSession", kHmacSession, 0x80000000).ok());
  EXPECT_EQ(ledger.owned_count(), 0u);
}

TEST(HandleLedgerRules, ASessionSlotIsOneHandleWhateverItsTypeByte) {
  HandleLedger ledger;
  const uint32_t before[] = {0x03000002};  // a policy session, or a saved one
  ledger.set_baseline(before);
  EXPECT_TRUE(ledger.foreign(0x02000002));
  EXPECT_FALSE(ledger.adopt("StartAuthSession", kHmacSession, 0x02000002).ok());
  ASSERT_TRUE(ledger.adopt("StartAuthSession", kHmacSession, 0x02000001).ok());
  // The TPM lists a saved HMAC session as 0x02…, a loaded policy one as 0x03….
  EXPECT_TRUE(ledger.owns(0x03000001));
}

TEST(HandleLedgerRules, ASessionContextComesBackUnderItsOwnHandle) {
  HandleLedger ledger;
  ledger.set_baseline({});
  ASSERT_TRUE(ledger.adopt("StartAuthSession", kHmacSession, 0x02000000).ok());
  CreatedHandle reload{ht::kHmacSession, 0x02000000};
  EXPECT_TRUE(ledger.adopt("ContextLoad", reload, 0x02000000).ok());
  Status swapped = ledger.adopt("ContextLoad", reload, 0x02000001);
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.error().kind(), ErrorKind::kIntegrity);
  EXPECT_EQ(swapped.error().message(), "ContextLoad returned 0x02000001 for session 0x02000000");
  // The session is still ours; the named handle was not adopted.
  EXPECT_TRUE(ledger.owns(0x02000000));
  EXPECT_FALSE(ledger.owns(0x02000001));
}

TEST(HandleLedgerRules, StraysAreTrackedHandlesNeitherOwnedNorForeign) {
  HandleLedger ledger;
  const uint32_t before[] = {0x80000000};
  ledger.set_baseline(before);
  ASSERT_TRUE(ledger.adopt("StartAuthSession", kHmacSession, 0x02000000).ok());
  const uint32_t listed[] = {0x80000000, 0x80000001, 0x02000000, 0x03000000, 0x02000004,
                             0x03000004, 0x40000001, 0x81000000, 0x01500000};
  EXPECT_EQ(ledger.strays(listed), (std::vector<uint32_t>{0x80000001, 0x02000004}));
}

}  // namespace
}  // namespace tpmsec
