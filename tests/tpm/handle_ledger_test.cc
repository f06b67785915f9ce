// The handle ledger (tpmsec/handle_ledger.h): which handles a Tpm may flush.
//
// HandleLedgerRules checks the bookkeeping alone. The live tests put the
// fault-injecting transport between tpmsec and the real TPM as an attacker
// who forges the responses of creating commands or loses them, and check
// with GetCapability, through a Tpm the attacker cannot touch, that no
// handle but the ones tpmsec created is ever flushed and none is left.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <set>

#include "support/fault_injection.h"
#include "support/test_tpm.h"
#include "testing/transport_doubles.h"
#include "tpmsec/command_table.h"
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

// What a Tpm holds, for the records of held_handles.h: what it owns, each
// session saved or loaded, and what it let go of whose flush did not clearly
// succeed; a number adopted anew is loaded, whatever its last owner did.
TEST(HandleLedgerRules, HeldIsOwnedAndUnflushedWithEachSessionsState) {
  HandleLedger ledger;
  ledger.set_baseline({});
  ASSERT_TRUE(ledger.adopt("StartAuthSession", kHmacSession, 0x02000001).ok());
  ASSERT_TRUE(ledger.adopt("ContextLoad", kTransient, 0x80000000).ok());
  ledger.note_saved(0x02000001, true);
  ledger.note_saved(0x80000000, true);  // an object stays loaded when saved
  ledger.note_saved(0x02000005, true);  // not owned: ignored
  EXPECT_EQ(ledger.held(), (std::vector<HeldHandle>{{0x02000001, true}, {0x80000000, false}}));
  ledger.note_saved(0x02000001, false);
  ledger.forget(0x80000000);
  ledger.need_flush(0x80000000);
  EXPECT_EQ(ledger.held(), (std::vector<HeldHandle>{{0x02000001, false}, {0x80000000, false}}));
  ledger.note_saved(0x02000001, true);
  ledger.forget(0x02000001);
  ledger.swept();
  EXPECT_EQ(ledger.held(), std::vector<HeldHandle>{});
  ASSERT_TRUE(ledger.adopt("StartAuthSession", kHmacSession, 0x02000001).ok());
  EXPECT_EQ(ledger.held(), (std::vector<HeldHandle>{{0x02000001, false}}));
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

// A failed command can only have left a handle of the kind it creates: the
// sweep it asks for covers that kind alone (a foreign handle of the other
// kind, hidden from the unauthenticated baseline, is never at stake), and
// for a session that session type alone (a lost session is loaded, and the
// TPM lists loaded sessions by type).
TEST(HandleLedgerRules, ASweepCoversOnlyTheKindThatMayHaveLeftAStray) {
  HandleLedger ledger;
  EXPECT_FALSE(ledger.sweep_pending());
  ledger.need_sweep(ht::kHmacSession);
  EXPECT_TRUE(ledger.sweep_pending());
  EXPECT_TRUE(ledger.sweep_pending(ht::kHmacSession));
  EXPECT_FALSE(ledger.sweep_pending(ht::kPolicySession));
  EXPECT_FALSE(ledger.sweep_pending(ht::kTransient));
  ledger.swept();
  EXPECT_FALSE(ledger.sweep_pending());
  ledger.need_sweep(ht::kTransient);
  EXPECT_TRUE(ledger.sweep_pending(ht::kTransient));
  EXPECT_FALSE(ledger.sweep_pending(ht::kHmacSession));
  ledger.need_sweep(0x81);  // a persistent handle is never swept
  EXPECT_FALSE(ledger.sweep_pending(0x81));
  ledger.need_sweep(ht::kPolicySession);
  EXPECT_TRUE(ledger.sweep_pending(ht::kPolicySession));
  EXPECT_FALSE(ledger.sweep_pending(ht::kHmacSession));
  // A flush that did not clearly succeed: that handle again by number, and
  // its type (the response that named it may have been forged).
  ledger.swept();
  ledger.need_flush(0x03000002);
  EXPECT_EQ(ledger.pending().unflushed, (std::set<uint32_t>{0x03000002}));
  EXPECT_TRUE(ledger.sweep_pending(ht::kPolicySession));
  EXPECT_FALSE(ledger.sweep_pending(ht::kHmacSession));
  ledger.swept();
  ledger.need_flush(0x80000001);
  EXPECT_EQ(ledger.pending().unflushed, (std::set<uint32_t>{0x80000001}));
  EXPECT_TRUE(ledger.sweep_pending(ht::kTransient));
  ledger.swept();
  ledger.need_flush(0x81000001);  // not tracked: never flushed
  EXPECT_FALSE(ledger.sweep_pending());
}

// ---------------------------------------------------------------------------
// Against the real TPM, with an attacker between tpmsec and it.

// What the interposer (an InterposingTransport, testing/transport_doubles.h)
// does: it lets the TPM run the command and rewrites the handle its success
// response names: response handles are covered by no HMAC.
struct HandleRewrite {
  // The next successful `command_code` names `handle` instead.
  void arm(uint32_t command_code, uint32_t new_handle) {
    code = command_code;
    handle = new_handle;
  }
  Result<Bytes> operator()(ByteView command, Transport& inner) {
    auto r = inner.transmit(command);
    if (code != 0 && testing::command_code_of(command) == code && testing::succeeded(r) && r->size() >= 14) {
      created = load_be32(r->data() + 10);
      store_be32(r->data() + 10, handle);
      code = 0;
    }
    return r;
  }
  uint32_t code = 0;
  uint32_t handle = 0;
  // The handle the TPM really returned the last time a response was rewritten.
  uint32_t created = 0;
};

Public sealed_data_template() {
  Public p;
  p.type = alg::kKeyedHash;
  p.name_alg = alg::kSha256;
  p.attributes = object_attr::kFixedTpm | object_attr::kFixedParent | object_attr::kUserWithAuth | object_attr::kNoDa;
  p.scheme = Scheme{alg::kNull, 0, 0};
  return p;
}

// The victim: a Tpm whose traffic passes the fault injector and the handle
// rewriter. tpm() reaches the same TPM directly: the test's own view, and
// "somebody else" creating objects and sessions.
class LedgerAttackTest : public testing::TpmTest {
 protected:
  void SetUp() override {
    TpmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    faults_ = std::make_unique<FaultInjectingTransport>(transport());
    rewriter_ = std::make_unique<testing::InterposingTransport>(
        *faults_, [this](ByteView c, Transport& inner) { return rewrite_(c, inner); }, "+rewrite");
    victim_ = std::make_unique<Tpm>(*rewriter_);
  }
  void TearDown() override {
    victim_.reset();
    rewriter_.reset();
    faults_.reset();
    TpmTest::TearDown();
  }

  std::unique_ptr<SessionFactory> factory() {
    ProtectionConfig config;
    config.trust_first_use = true;  // this interposer leaves the null key alone
    auto f = SessionFactory::create(*victim_, config);
    EXPECT_TRUE(f.ok()) << f.error().message();
    return f.ok() ? std::move(*f) : nullptr;
  }

  // Transient objects, loaded and saved sessions, as the TPM lists them.
  std::set<uint32_t> handles_in_tpm() {
    std::set<uint32_t> out;
    for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
      auto r = tpm().run(cmd::GetCapability{cap::kHandles, first, 128});
      EXPECT_TRUE(r.ok()) << r.error().message();
      if (!r.ok()) continue;
      for (uint32_t h : r->capability_data.handles) out.insert(HandleLedger::slot(h));
    }
    return out;
  }

  // Somebody else's object: the null primary, created directly.
  uint32_t foreign_object() {
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(rh::kNull);
    c.in_public.public_area = null_key_template(SaltKind::kEcc);
    auto r = tpm().run(c, {Auth::password()});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? r->object_handle : 0;
  }
  // It still exists and works: ReadPublic answers for it.
  void expect_object_works(uint32_t handle) {
    auto r = tpm().run(cmd::ReadPublic{NamedHandle::of(handle)});
    EXPECT_TRUE(r.ok()) << std::hex << handle << ": " << (r.ok() ? "" : r.error().message());
  }
  // A session that still works: a protected extend through it succeeds.
  void expect_session_works(Tpm& through, HmacSession& session) {
    Status st = pcr_extend(through, alg::kSha256, 16, Bytes(32, 0x5a), Auth{&session, {}});
    EXPECT_TRUE(st.ok()) << std::hex << session.handle() << ": " << (st.ok() ? "" : st.error().message());
  }

  std::unique_ptr<FaultInjectingTransport> faults_;
  HandleRewrite rewrite_;
  std::unique_ptr<testing::InterposingTransport> rewriter_;
  std::unique_ptr<Tpm> victim_;
};

TEST_P(LedgerAttackTest, AForgedStartAuthSessionNamingTheCallersSessionFlushesNeither) {
  auto f = factory();
  ASSERT_TRUE(f);
  auto mine = f->start(attr::kContinueSession);
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  uint32_t live = (*mine)->handle();

  rewrite_.arm(cc::kStartAuthSession, live);
  auto forged = f->start(0);
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(forged.error().message().find("already in use"), std::string::npos) << forged.error().message();
  uint32_t real = rewrite_.created;
  ASSERT_NE(real, live);

  // The caller's session is there and works; the one the TPM created was swept.
  EXPECT_EQ(handles_in_tpm(), (std::set<uint32_t>{HandleLedger::slot(live)}));
  expect_session_works(*victim_, **mine);
  EXPECT_TRUE(victim_->ledger().owns(live));
  EXPECT_FALSE(victim_->ledger().sweep_pending());
  mine->reset();
  EXPECT_TRUE(handles_in_tpm().empty());
}

TEST_P(LedgerAttackTest, AForgedStartAuthSessionNamingSomebodyElsesSessionFlushesNeither) {
  // Somebody else's session, started before the victim's first creation.
  SessionOptions unsalted;
  unsalted.attributes = attr::kContinueSession;
  auto theirs = HmacSession::start(tpm(), unsalted);
  ASSERT_TRUE(theirs.ok()) << theirs.error().message();
  uint32_t foreign = (*theirs)->handle();

  auto f = factory();
  ASSERT_TRUE(f);
  rewrite_.arm(cc::kStartAuthSession, foreign);
  auto forged = f->start(0);
  ASSERT_FALSE(forged.ok());
  EXPECT_EQ(forged.error().kind(), ErrorKind::kIntegrity);
  EXPECT_EQ(handles_in_tpm(), (std::set<uint32_t>{HandleLedger::slot(foreign)}));
  expect_session_works(tpm(), **theirs);
  EXPECT_EQ(victim_->ledger().owned_count(), 0u);
}

TEST_P(LedgerAttackTest, AForgedCreatePrimaryNamingAnotherObjectLeavesIt) {
  uint32_t theirs = foreign_object();
  ASSERT_NE(theirs, 0u);
  rewrite_.arm(cc::kCreatePrimary, theirs);
  auto key = NullKey::create(*victim_, SaltKind::kEcc);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(key.error().message().find("already in use"), std::string::npos) << key.error().message();
  EXPECT_NE(rewrite_.created, theirs);
  EXPECT_EQ(handles_in_tpm(), (std::set<uint32_t>{theirs}));
  expect_object_works(theirs);
}

TEST_P(LedgerAttackTest, AForgedContextLoadNamingALiveHandleLeavesIt) {
  uint32_t theirs = foreign_object();
  ASSERT_NE(theirs, 0u);
  auto f = factory();
  ASSERT_TRUE(f);
  auto mine = f->start(attr::kContinueSession);
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  // The null key's ContextLoad names somebody else's object, then the
  // caller's own session.
  for (uint32_t named : {theirs, (*mine)->handle()}) {
    SCOPED_TRACE(::testing::Message() << std::hex << named);
    rewrite_.arm(cc::kContextLoad, named);
    auto forged = f->start(0);
    ASSERT_FALSE(forged.ok());
    EXPECT_EQ(forged.error().kind(), ErrorKind::kIntegrity) << forged.error().message();
    EXPECT_EQ(handles_in_tpm(), (std::set<uint32_t>{theirs, HandleLedger::slot((*mine)->handle())}));
    expect_object_works(theirs);
    expect_session_works(*victim_, **mine);
  }
  mine->reset();
  EXPECT_EQ(handles_in_tpm(), (std::set<uint32_t>{theirs}));
}

TEST_P(LedgerAttackTest, AForgedSessionContextLoadNamingAnotherSessionLeavesBoth) {
  auto f = factory();
  ASSERT_TRUE(f);
  auto other = f->start(attr::kContinueSession);
  auto saved = f->start(attr::kContinueSession);
  ASSERT_TRUE(other.ok() && saved.ok());
  auto context = (*saved)->save(*victim_);
  ASSERT_TRUE(context.ok()) << context.error().message();

  rewrite_.arm(cc::kContextLoad, (*other)->handle());
  Status loaded = (*saved)->load(*victim_, *context);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().kind(), ErrorKind::kIntegrity);
  EXPECT_NE(loaded.error().message().find("for session"), std::string::npos) << loaded.error().message();
  expect_session_works(*victim_, **other);
  // The saved session is still the caller's: flushing it ends it.
  EXPECT_TRUE(victim_->ledger().owns((*saved)->handle()));
  ASSERT_TRUE((*saved)->flush().ok());
  EXPECT_EQ(handles_in_tpm(), (std::set<uint32_t>{HandleLedger::slot((*other)->handle())}));
  other->reset();
  EXPECT_TRUE(handles_in_tpm().empty());
}

// The success path of a one-shot protected extend sends what it always did;
// the ledger's baseline is three GetCapability once per Tpm, and none at all
// on an in-process TPM.
TEST_P(LedgerAttackTest, TheSuccessPathSendsNothingExtra) {
  constexpr uint32_t kList = 0x17A, kCreatePrimary = 0x131, kSave = 0x162, kFlush = 0x165, kLoad = 0x161,
                     kStart = 0x176, kExtend = 0x182;
  const std::vector<uint32_t> create = {kCreatePrimary, kSave, kFlush};
  const std::vector<uint32_t> one_shot = {kLoad, kStart, kFlush, kExtend};
  for (bool interposed : {true, false}) {
    SCOPED_TRACE(interposed ? "through the interposer" : "direct");
    if (!interposed && !transport().in_process()) continue;
    testing::RecordingTransport log(interposed ? static_cast<Transport&>(*faults_) : transport());
    Tpm t(log);
    ProtectionConfig config;
    config.trust_first_use = true;
    auto f = SessionFactory::create(t, config);
    ASSERT_TRUE(f.ok()) << f.error().message();
    for (int i = 0; i < 2; ++i) {
      auto s = (*f)->start(0);
      ASSERT_TRUE(s.ok()) << s.error().message();
      ASSERT_TRUE(pcr_extend(t, alg::kSha256, 16, Bytes(32, 1), Auth{s->get(), {}}).ok());
    }
    std::vector<uint32_t> expected;
    if (!log.in_process()) expected = {kList, kList, kList};
    for (auto* part : {&create, &one_shot, &one_shot}) expected.insert(expected.end(), part->begin(), part->end());
    EXPECT_EQ(log.codes(), expected);
    EXPECT_EQ(t.ledger().owned_count(), 0u);
  }
}

// What the session sweep relies on (Part 3 §30.2): GetCapability(
// TPM_CAP_HANDLES, 0x02000000) lists the loaded sessions with their type,
// an HMAC session as 0x02…, a policy session as 0x03…, and no saved one.
TEST_P(LedgerAttackTest, LoadedSessionsAreListedByType) {
  cmd::StartAuthSession hmac;
  hmac.nonce_caller.bytes = Bytes(32, 1);
  cmd::StartAuthSession policy = hmac;
  policy.session_type = se::kPolicy;
  auto h = tpm().run(hmac);
  auto p = tpm().run(policy);
  auto saved = tpm().run(hmac);
  ASSERT_TRUE(h.ok() && p.ok() && saved.ok());
  ASSERT_TRUE(tpm().run(cmd::ContextSave{NamedHandle::of(saved->session_handle)}).ok());
  EXPECT_EQ(h->session_handle >> 24, ht::kHmacSession);
  EXPECT_EQ(p->session_handle >> 24, ht::kPolicySession);
  auto listed = tpm().list_handles(ht::kFirstLoadedSession);
  ASSERT_TRUE(listed.ok()) << listed.error().message();
  EXPECT_EQ(*listed, (std::vector<uint32_t>{h->session_handle, p->session_handle}));
  for (uint32_t handle : {h->session_handle, p->session_handle, saved->session_handle}) {
    EXPECT_TRUE(tpm().run(cmd::FlushContext{handle}).ok()) << std::hex << handle;
  }
}

// A foreign policy session the victim's baseline does not show (created
// after it: what hiding it from the listing amounts to) survives a lost
// HMAC StartAuthSession: the sweep flushes the victim's stray HMAC session
// and no policy session. (A foreign HMAC session hidden that way would be
// flushed: docs/threat-model.md, "Handles".)
TEST_P(LedgerAttackTest, AHiddenPolicySessionSurvivesALostHmacSession) {
  auto f = factory();
  ASSERT_TRUE(f);
  auto first = f->start(0);  // takes the baseline
  ASSERT_TRUE(first.ok()) << first.error().message();
  first->reset();
  const std::set<uint32_t> before = handles_in_tpm();
  cmd::StartAuthSession policy;
  policy.nonce_caller.bytes = Bytes(32, 2);
  policy.session_type = se::kPolicy;
  auto theirs = tpm().run(policy);
  ASSERT_TRUE(theirs.ok()) << theirs.error().message();
  ASSERT_EQ(theirs->session_handle >> 24, ht::kPolicySession);

  auto fired = std::make_shared<bool>(false);
  faults_->set_hook([fired](size_t, uint32_t code, ByteView) {
    if (*fired || code != cc::kStartAuthSession) return Fault::pass();
    *fired = true;
    return Fault::fail(true);  // the TPM ran it; the answer is lost
  });
  auto lost = f->start(0);
  faults_->set_hook(nullptr);
  ASSERT_TRUE(*fired);
  ASSERT_FALSE(lost.ok());
  std::set<uint32_t> expected = before;
  expected.insert(HandleLedger::slot(theirs->session_handle));
  EXPECT_EQ(handles_in_tpm(), expected);
  EXPECT_FALSE(victim_->ledger().sweep_pending());
  EXPECT_TRUE(tpm().run(cmd::FlushContext{theirs->session_handle}).ok());
}

// Applies `fault` to the next command with `code` while armed, once.
struct OneShot {
  uint32_t code = 0;
  Fault fault;
  bool fired = false;
};

// Lost and broken responses of every creating command, many times over: the
// TPM ran the command and the client never learned the handle (or learned a
// wrong one). Afterwards the TPM holds what it held before the operation:
// somebody else's object and session and the caller's parent key, nothing more.
TEST_P(LedgerAttackTest, LostResponsesOfEveryCreatingCommandLeaveNothing) {
  constexpr int kRounds = 20;  // x 6 faults x 5 commands
  uint32_t their_object = foreign_object();
  SessionOptions unsalted;
  unsalted.attributes = attr::kContinueSession;
  auto their_session = HmacSession::start(tpm(), unsalted);
  ASSERT_TRUE(their_session.ok());
  auto f = factory();
  ASSERT_TRUE(f);
  // The caller's parent for Load, and an object to load under it.
  auto parent_key = NullKey::create(*victim_, SaltKind::kEcc);
  ASSERT_TRUE(parent_key.ok()) << parent_key.error().message();
  auto parent = parent_key->load(*victim_);
  ASSERT_TRUE(parent.ok()) << parent.error().message();
  cmd::Create create;
  create.parent_handle = parent_key->named(parent->get());
  create.in_sensitive.data = Bytes(16, 0x42);
  create.in_public.public_area = sealed_data_template();
  auto sealed = victim_->run(create, {Auth::password()});
  ASSERT_TRUE(sealed.ok()) << sealed.error().message();
  const std::set<uint32_t> before = handles_in_tpm();
  ASSERT_EQ(before, (std::set<uint32_t>{their_object, HandleLedger::slot((*their_session)->handle()), parent->get()}));

  auto shot = std::make_shared<OneShot>();
  faults_->set_hook([shot](size_t, uint32_t code, ByteView) {
    if (shot->fired || code != shot->code) return Fault::pass();
    shot->fired = true;
    return shot->fault;
  });
  auto arm = [&](uint32_t code, Fault fault) { *shot = OneShot{code, std::move(fault), false}; };

  struct Operation {
    const char* name;
    std::function<Status(const Fault&)> run;
  };
  const std::vector<Operation> operations = {
      {"CreatePrimary",
       [&](const Fault& fault) -> Status {
         arm(cc::kCreatePrimary, fault);
         return status_of(NullKey::create(*victim_, SaltKind::kEcc));
       }},
      {"StartAuthSession",
       [&](const Fault& fault) -> Status {
         arm(cc::kStartAuthSession, fault);
         return status_of(f->start(0));
       }},
      {"ContextLoad of an object",
       [&](const Fault& fault) -> Status {
         arm(cc::kContextLoad, fault);
         return status_of(f->start(0));
       }},
      {"ContextLoad of a session",
       [&](const Fault& fault) -> Status {
         TPMSEC_ASSIGN_OR_RETURN(auto s, f->start(attr::kContinueSession));
         TPMSEC_ASSIGN_OR_RETURN(Context context, s->save(*victim_));
         arm(cc::kContextLoad, fault);
         return s->load(*victim_, context);
       }},
      {"Load",
       [&](const Fault& fault) -> Status {
         cmd::Load load;
         load.parent_handle = parent_key->named(parent->get());
         load.in_private = sealed->out_private;
         load.in_public = sealed->out_public;
         arm(cc::kLoad, fault);
         TPMSEC_ASSIGN_OR_RETURN(auto loaded, victim_->run(load, {Auth::password()}));
         return victim_->flush(loaded.object_handle);
       }},
  };
  size_t failures = 0, operations_run = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::vector<std::pair<const char*, Fault>> faults = {
        {"transmission error after execution", Fault::fail(true)},
        {"forged TPM_RC_FAILURE after execution", Fault::forge_error(rc::kFailure, true)},
        {"forged TPM_RC_RETRY after execution", Fault::forge_error(rc::kRetry, true)},
        {"response cut to its header", Fault::truncate_response(10)},
        {"response with a trailing byte", Fault::append_response({0})},
        // The handle itself: another number, perhaps one in use.
        {"response handle flipped", Fault::flip_response(13, static_cast<uint8_t>(1 + round % 7))},
    };
    for (const auto& [fault_name, fault] : faults) {
      for (const Operation& op : operations) {
        SCOPED_TRACE(::testing::Message() << op.name << ", " << fault_name << ", round " << round);
        Status st = op.run(fault);
        ++operations_run;
        if (!st.ok()) ++failures;
        EXPECT_TRUE(shot->fired);
        std::set<uint32_t> now = handles_in_tpm();
        EXPECT_EQ(now, before);
        // Clean up so one leak is reported once.
        for (uint32_t h : now) {
          if (!before.count(h)) (void)tpm().run(cmd::FlushContext{h});
        }
        if (HasFailure()) return;
      }
    }
  }
  faults_->set_hook(nullptr);
  std::cout << operations_run << " creations with lost or broken responses, " << failures
            << " failed, 0 handles left\n";
  expect_object_works(their_object);
  expect_session_works(tpm(), **their_session);
}

// FlushContext lost or answered with a forged error, executed or not: the
// flush does not clearly succeed, so the Tpm sweeps. (A forged success for a
// FlushContext that never reached the TPM is the one loss nothing notices:
// see handle_ledger.h.)
TEST_P(LedgerAttackTest, FlushesThatDoNotClearlySucceedLeaveNothing) {
  auto f = factory();
  ASSERT_TRUE(f);
  auto shot = std::make_shared<OneShot>();
  faults_->set_hook([shot](size_t, uint32_t code, ByteView) {
    if (shot->fired || code != shot->code) return Fault::pass();
    shot->fired = true;
    return shot->fault;
  });
  const std::vector<std::pair<const char*, Fault>> faults = {
      {"transmission error after execution", Fault::fail(true)},
      {"transmission error, not sent", Fault::fail(false)},
      {"forged TPM_RC_FAILURE after execution", Fault::forge_error(rc::kFailure, true)},
      {"forged TPM_RC_FAILURE, not sent", Fault::forge_error(rc::kFailure, false)},
      {"forged TPM_RC_HANDLE, not sent", Fault::forge_error(0x18B, false)},
      {"response with a trailing byte", Fault::append_response({0})},
  };
  for (int round = 0; round < 10; ++round) {
    for (const auto& [name, fault] : faults) {
      SCOPED_TRACE(::testing::Message() << name << ", round " << round);
      auto s = f->start(attr::kContinueSession);
      ASSERT_TRUE(s.ok()) << s.error().message();
      *shot = OneShot{cc::kFlushContext, fault, false};
      s->reset();
      EXPECT_TRUE(shot->fired);
      EXPECT_TRUE(handles_in_tpm().empty());
      EXPECT_EQ(victim_->ledger().owned_count(), 0u);
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransports, LedgerAttackTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
