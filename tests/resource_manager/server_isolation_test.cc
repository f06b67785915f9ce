// The server layer's handle spaces (tpmsec-server/resource_manager/handle_space.h) attacked
// as a second local client would attack them (issue 33's list of what
// client B did to client A through `tpmsec emulate --private-handles`),
// each client a HandleSpace over one embedded libtpms: B's frames are real
// TPM frames naming A's handles, virtual and physical; every refusal is
// checked against A's state afterwards and against what the TPM itself
// holds (a direct GetCapability, past the spaces).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "support/tpm_frames.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/emulation/slot_limits.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/null_key.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using server::ClientLimits;
using server::HandleSpace;
using server::PeerIdentity;
using server::ResourceManager;
using testing::build_command;
using testing::CommandFrame;
using testing::password_command;
using testing::response_code_of;
using testing::SessionEntry;

constexpr uint32_t kPolicySecret = 0x151, kPolicyCommandCode = 0x16C, kPolicyGetDigest = 0x189;
constexpr uint32_t kUnseal = 0x15E, kGetRandom = 0x17B;
// The refusals (Part 2 §6.6): TPM_RC_HANDLE for handle 1, session 1, parameter 1.
constexpr uint32_t kHandle1 = 0x18B, kSession1 = 0x98B, kParameter1 = 0x1CB;

Bytes plain(uint32_t code, std::vector<uint32_t> handles, Bytes parameters = {}) {
  return build_command(CommandFrame{code, std::move(handles), {}, std::move(parameters)});
}
// Under `session` (continueSession, no HMAC: a policy session whose policy
// needs none, or a session an attacker names without knowing its key).
Bytes in_session(uint32_t code, std::vector<uint32_t> handles, uint32_t session, Bytes parameters = {}) {
  return build_command(CommandFrame{
      code, std::move(handles), {SessionEntry{session, {}, attr::kContinueSession, {}}}, std::move(parameters)});
}

class SpaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tpm = open_embedded();
    ASSERT_TRUE(tpm.ok()) << tpm.error().message();
    tpm_ = std::move(*tpm);
    manager_ = std::make_unique<ResourceManager>(*tpm_, [this](const std::string& line) { log_ += line + "\n"; });
    ASSERT_TRUE(manager_->start().ok());
  }
  void TearDown() override {
    manager_.reset();
    tpm_.reset();
  }

  std::unique_ptr<HandleSpace> client(PeerIdentity peer = {}, ClientLimits limits = {}) {
    return std::make_unique<HandleSpace>(*manager_, ++last_, limits, peer);
  }

  // What the TPM itself holds (transient objects, loaded and saved sessions).
  std::vector<uint32_t> on_tpm() {
    Tpm direct(*tpm_);
    std::vector<uint32_t> out;
    for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
      auto listed = direct.list_handles(first);
      EXPECT_TRUE(listed.ok()) << listed.error().message();
      if (listed.ok()) out.insert(out.end(), listed->begin(), listed->end());
    }
    return out;
  }

  static uint32_t rc(Transport& t, ByteView frame) {
    auto r = t.transmit(frame);
    return r.ok() ? response_code_of(*r) : 0xFFFFFFFF;
  }
  static Result<Bytes> answer(Transport& t, ByteView frame) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes r, t.transmit(frame));
    if (response_code_of(r) != 0) return Error(ErrorKind::kTpm, "refused", response_code_of(r));
    return r;
  }

  static uint32_t primary(Transport& t, uint32_t hierarchy = rh::kNull) {
    Tpm tpm(t);
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(hierarchy);
    c.in_public.public_area = null_key_template(SaltKind::kEcc);
    auto r = tpm.run(c, {Auth::password()});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? r->object_handle : 0;
  }
  static uint32_t start_session(Transport& t, uint8_t type) {
    Tpm tpm(t);
    cmd::StartAuthSession s;
    s.nonce_caller.bytes = Bytes(32, 0x5A);
    s.session_type = type;
    auto r = tpm.run(s);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? r->session_handle : 0;
  }
  static Bytes policy_digest(Transport& t, uint32_t session) {
    auto r = answer(t, plain(kPolicyGetDigest, {session}));
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? Bytes(r->begin() + 10, r->end()) : Bytes{};
  }
  static std::vector<uint32_t> listed(Transport& t, uint32_t first) {
    auto r = Tpm(t).list_handles(first);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? *r : std::vector<uint32_t>{};
  }
  // PolicySecret(owner) on `session`, authorized with the owner's (empty) password.
  static uint32_t policy_secret(Transport& t, uint32_t session) {
    return rc(t, password_command(kPolicySecret, {rh::kOwner, session}, Bytes(10, 0)));
  }

  std::unique_ptr<Transport> tpm_;
  std::unique_ptr<ResourceManager> manager_;
  std::string log_;
  server::ClientId last_ = 0;
};

// B lists, reads, uses, saves and flushes A's object and policy session, by
// A's virtual handles and by the TPM's own: every attempt refused with the
// TPM's handle error for that position; A's object and session unchanged
// (B's PolicyCommandCode did not land in A's session).
TEST_F(SpaceTest, AnotherClientCannotListReadUseSaveOrFlush) {
  auto a = client();
  auto b = client();
  const uint32_t object = primary(*a);
  const uint32_t session = start_session(*a, se::kPolicy);
  ASSERT_NE(object, 0u);
  ASSERT_NE(session, 0u);
  EXPECT_EQ(object >> 24, ht::kTransient);
  ASSERT_EQ(rc(*a, plain(kPolicyCommandCode, {session}, be32(kUnseal))), 0u);
  const Bytes digest = policy_digest(*a, session);

  EXPECT_TRUE(listed(*b, ht::kFirstTransient).empty());
  EXPECT_TRUE(listed(*b, ht::kFirstLoadedSession).empty());
  EXPECT_TRUE(listed(*b, ht::kFirstSavedSession).empty());
  for (uint32_t h : {object, 0x80000000u, 0x80000001u, 0x80000002u}) {
    SCOPED_TRACE(h);
    EXPECT_EQ(rc(*b, plain(cmd::ReadPublic::kInfo.code, {h})), kHandle1);
    EXPECT_EQ(rc(*b, plain(cmd::ContextSave::kInfo.code, {h})), kHandle1);
    EXPECT_EQ(rc(*b, plain(cmd::FlushContext::kInfo.code, {}, be32(h))), kParameter1);
  }
  EXPECT_EQ(rc(*b, plain(cmd::ContextSave::kInfo.code, {session})), kHandle1);
  EXPECT_EQ(rc(*b, plain(cmd::FlushContext::kInfo.code, {}, be32(session))), kParameter1);
  EXPECT_EQ(rc(*b, plain(kPolicyCommandCode, {session}, be32(kGetRandom))), kHandle1);
  EXPECT_EQ(rc(*b, plain(kPolicyGetDigest, {session})), kHandle1);
  EXPECT_EQ(rc(*b, in_session(kGetRandom, {}, session, Bytes{0, 8})), kSession1);
  EXPECT_EQ(policy_secret(*b, session), 0x28B);  // handle 2, the policy session

  // A: its object, its session and its session's policy as they were.
  EXPECT_EQ(rc(*a, plain(cmd::ReadPublic::kInfo.code, {object})), 0u);
  EXPECT_EQ(policy_digest(*a, session), digest);
  EXPECT_EQ(listed(*a, ht::kFirstTransient), std::vector<uint32_t>{object});
  EXPECT_EQ(listed(*a, ht::kFirstLoadedSession), std::vector<uint32_t>{session});
  // The TPM holds A's object and session (loaded: nobody needed the slots),
  // nothing of B's; all of it gone once A closes.
  EXPECT_EQ(on_tpm().size(), 2u);
  a.reset();
  EXPECT_TRUE(on_tpm().empty());
}

// The attack: A's sealed secret (policy PolicySecret(owner)) and
// A's policy session satisfied with the owner's authorization. B, holding
// A's sealed blob and loading it into its own space, cannot unseal with
// A's session; A can.
TEST_F(SpaceTest, AnotherClientCannotUnsealThroughASatisfiedPolicySession) {
  auto a = client();
  auto b = client();
  // The policy: PolicySecret(owner), computed by a trial session.
  const uint32_t trial = start_session(*a, se::kTrial);
  ASSERT_EQ(policy_secret(*a, trial), 0u);
  const Bytes policy = policy_digest(*a, trial);
  ASSERT_EQ(policy.size(), 2u + 32u);
  ASSERT_EQ(rc(*a, plain(cmd::FlushContext::kInfo.code, {}, be32(trial))), 0u);

  const Bytes secret = {'A', '\'', 's', ' ', 's', 'e', 'c', 'r', 'e', 't'};
  const uint32_t parent = primary(*a, rh::kOwner);
  Tpm ta(*a);
  cmd::Create create;
  create.parent_handle = NamedHandle::of(parent);
  create.in_sensitive.data = secret;
  Public& p = create.in_public.public_area;
  p.type = alg::kKeyedHash;
  p.name_alg = alg::kSha256;
  p.attributes = object_attr::kFixedTpm | object_attr::kFixedParent | object_attr::kNoDa;  // policy only
  p.auth_policy = Bytes(policy.begin() + 2, policy.end());
  p.scheme = Scheme{alg::kNull, 0, 0};
  auto created = ta.run(create, {Auth::password()});
  ASSERT_TRUE(created.ok()) << created.error().message();
  auto loaded =
      ta.run(cmd::Load{NamedHandle::of(parent), created->out_private, created->out_public}, {Auth::password()});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  const uint32_t sealed = loaded->object_handle;

  const uint32_t session = start_session(*a, se::kPolicy);
  ASSERT_EQ(policy_secret(*a, session), 0u);

  // B has A's blob (a file left readable, say) and the same primary.
  const uint32_t b_parent = primary(*b, rh::kOwner);
  Tpm tb(*b);
  auto b_loaded =
      tb.run(cmd::Load{NamedHandle::of(b_parent), created->out_private, created->out_public}, {Auth::password()});
  ASSERT_TRUE(b_loaded.ok()) << b_loaded.error().message();
  EXPECT_EQ(rc(*b, in_session(kUnseal, {b_loaded->object_handle}, session)), kSession1);
  EXPECT_EQ(rc(*b, in_session(kUnseal, {sealed}, session)), kSession1);
  // Without A's session B gets nowhere either (the policy needs the owner's secret).
  const uint32_t b_session = start_session(*b, se::kPolicy);
  EXPECT_NE(rc(*b, in_session(kUnseal, {b_loaded->object_handle}, b_session)), 0u);

  auto unsealed = answer(*a, in_session(kUnseal, {sealed}, session));
  ASSERT_TRUE(unsealed.ok()) << unsealed.error().message();
  EXPECT_NE(std::search(unsealed->begin(), unsealed->end(), secret.begin(), secret.end()), unsealed->end());
}

// More objects than the TPM's three slots, across clients: an object is
// saved and flushed when a command needs its slot (the least recently used
// first) and loaded again before the next command that names it, so four
// clients with three objects each (and a child key each, needing parent and
// child at once) all work.
TEST_F(SpaceTest, ObjectsAreSwappedSoManyClientsShareThreeSlots) {
  std::vector<std::unique_ptr<HandleSpace>> clients;
  std::vector<std::vector<std::pair<uint32_t, Bytes>>> objects(4);
  for (int i = 0; i < 4; ++i) clients.push_back(client());
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < clients.size(); ++i) {
      Tpm tpm(*clients[i]);
      cmd::CreatePrimary c;
      c.primary_handle = NamedHandle::of(rh::kNull);
      c.in_public.public_area = null_key_template(SaltKind::kEcc);
      c.in_sensitive.data = {};
      c.outside_info.bytes = Bytes{static_cast<uint8_t>(i), static_cast<uint8_t>(round)};
      auto r = tpm.run(c, {Auth::password()});
      ASSERT_TRUE(r.ok()) << "client " << i << ", object " << round << ": " << r.error().message();
      objects[i].emplace_back(r->object_handle, r->name.bytes);
    }
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    Tpm tpm(*clients[i]);
    EXPECT_EQ(listed(*clients[i], ht::kFirstTransient).size(), 3u);
    for (const auto& [handle, name] : objects[i]) {
      auto r = tpm.run(cmd::ReadPublic{NamedHandle::of(handle)});
      ASSERT_TRUE(r.ok()) << "client " << i << ": " << r.error().message();
      EXPECT_EQ(r->name.bytes, name);
    }
    cmd::Create create;
    create.parent_handle = NamedHandle::of(objects[i][0].first);
    Public& p = create.in_public.public_area;
    p.type = alg::kKeyedHash;
    p.name_alg = alg::kSha256;
    p.attributes = object_attr::kFixedTpm | object_attr::kFixedParent | object_attr::kUserWithAuth;
    p.scheme = Scheme{alg::kNull, 0, 0};
    create.in_sensitive.data = Bytes(8, static_cast<uint8_t>(i));
    auto child = tpm.run(create, {Auth::password()});
    ASSERT_TRUE(child.ok()) << child.error().message();
    auto loaded = tpm.run(cmd::Load{create.parent_handle, child->out_private, child->out_public}, {Auth::password()});
    ASSERT_TRUE(loaded.ok()) << loaded.error().message();
    auto unsealed = tpm.run(cmd::Unseal{NamedHandle::of(loaded->object_handle)}, {Auth::password()});
    ASSERT_TRUE(unsealed.ok()) << unsealed.error().message();
    EXPECT_EQ(unsealed->out_data.bytes, Bytes(8, static_cast<uint8_t>(i)));
  }
  EXPECT_LE(Tpm(*tpm_).list_handles(ht::kFirstTransient)->size(), 3u);
  clients.clear();
  EXPECT_TRUE(on_tpm().empty());
  EXPECT_EQ(manager_->entries(), 0u);
}

// A session context a client saved is bound to it: another client's
// ContextLoad of it is refused while it is connected; once it closed, only a
// client of the same peer (uid) may take it (tpm2-tools saves a session in
// one process and loads it in the next), never another uid's.
TEST_F(SpaceTest, SavedSessionContextsAreBoundToTheirClient) {
  auto a = client(PeerIdentity{1000});
  auto b = client(PeerIdentity{1000});
  const uint32_t session = start_session(*a, se::kHmac);
  auto saved = answer(*a, plain(cmd::ContextSave::kInfo.code, {session}));
  ASSERT_TRUE(saved.ok()) << saved.error().message();
  const Bytes context(saved->begin() + 10, saved->end());
  EXPECT_EQ(listed(*a, ht::kFirstSavedSession), std::vector<uint32_t>{session});
  EXPECT_EQ(rc(*b, plain(cmd::ContextLoad::kInfo.code, {}, context)), kParameter1);
  auto again = answer(*a, plain(cmd::ContextLoad::kInfo.code, {}, context));
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(load_be32(again->data() + 10), session);
  saved = answer(*a, plain(cmd::ContextSave::kInfo.code, {session}));
  ASSERT_TRUE(saved.ok());
  const Bytes kept(saved->begin() + 10, saved->end());
  a.reset();  // A's process ends; the session it saved stays (for uid 1000)
  EXPECT_EQ(on_tpm().size(), 1u);

  auto other_uid = client(PeerIdentity{2000});
  auto no_uid = client();
  EXPECT_EQ(rc(*other_uid, plain(cmd::ContextLoad::kInfo.code, {}, kept)), kParameter1);
  EXPECT_EQ(rc(*no_uid, plain(cmd::ContextLoad::kInfo.code, {}, kept)), kParameter1);
  EXPECT_EQ(rc(*b, plain(cmd::ContextLoad::kInfo.code, {}, context)), kParameter1);  // the older blob
  auto claimed = answer(*b, plain(cmd::ContextLoad::kInfo.code, {}, kept));
  ASSERT_TRUE(claimed.ok()) << claimed.error().message();
  // B names it now; the TPM, not the space, judges its (missing) HMAC.
  EXPECT_NE(rc(*b, in_session(kGetRandom, {}, session, Bytes{0, 8})), kSession1);
  b.reset();  // B did not save it: flushed
  EXPECT_TRUE(on_tpm().empty());
}

// A client that closes (or crashes) leaves nothing on the TPM: its objects
// are not there between commands, its sessions are flushed.
TEST_F(SpaceTest, ClosingAClientFlushesWhatItCreated) {
  auto a = client();
  primary(*a);
  primary(*a);
  start_session(*a, se::kHmac);
  start_session(*a, se::kPolicy);
  EXPECT_EQ(on_tpm().size(), 4u);
  a.reset();
  EXPECT_TRUE(on_tpm().empty());
  EXPECT_EQ(manager_->entries(), 0u);
}

// Context gap (Part 1 §30.5): a client that saves and loads its session
// hundreds of times runs the TPM's context counter far past another
// client's saved session; the manager loads and saves the oldest again
// ("un-gapping") and both keep working: the other client loads its session
// with the context it saved long ago (answered with the current one). On a
// chip with a gap of 255 (the emulation layer's SlotLimitTransport, as the
// profiled chips have it; libtpms' own is 65535).
TEST_F(SpaceTest, ContextGapKeepsLongLivedSessions) {
  SlotLimitTransport chip(*tpm_, SlotLimits{3, 3, 64, 255, "test", ""});
  ResourceManager manager(chip, [this](const std::string& line) { log_ += line + "\n"; });
  ASSERT_TRUE(manager.start().ok());
  HandleSpace a(manager, 1, {}, {});
  HandleSpace b(manager, 2, {}, {});
  const uint32_t kept = start_session(a, se::kPolicy);
  const Bytes digest = policy_digest(a, kept);
  auto saved_by_a = answer(a, plain(cmd::ContextSave::kInfo.code, {kept}));
  ASSERT_TRUE(saved_by_a.ok()) << saved_by_a.error().message();
  const uint32_t churn = start_session(b, se::kHmac);
  for (int i = 0; i < 400; ++i) {
    auto saved = answer(b, plain(cmd::ContextSave::kInfo.code, {churn}));
    ASSERT_TRUE(saved.ok()) << i << ": " << saved.error().message();
    ASSERT_EQ(rc(b, plain(cmd::ContextLoad::kInfo.code, {}, Bytes(saved->begin() + 10, saved->end()))), 0u) << i;
  }
  EXPECT_NE(log_.find("context gap"), std::string::npos) << "the chip's gap was never reached: " << log_;
  ASSERT_EQ(rc(a, plain(cmd::ContextLoad::kInfo.code, {}, Bytes(saved_by_a->begin() + 10, saved_by_a->end()))), 0u);
  EXPECT_EQ(policy_digest(a, kept), digest);
}

// B cannot starve A of session slots (issue 33: B held every loaded-session
// slot and A's StartAuthSession got TPM_RC_SESSION_MEMORY): the least
// recently used session, B's, is saved to make room, and every session of
// both still works, loaded back under its handle when named.
TEST_F(SpaceTest, NoClientCanStarveAnotherOfSessionSlots) {
  auto a = client();
  auto b = client();
  std::vector<uint32_t> bs;
  for (int i = 0; i < 3; ++i) bs.push_back(start_session(*b, se::kPolicy));
  std::vector<Bytes> digests;
  for (uint32_t h : bs) digests.push_back(policy_digest(*b, h));
  const uint32_t mine = start_session(*a, se::kPolicy);
  ASSERT_NE(mine, 0u);
  ASSERT_EQ(rc(*a, plain(kPolicyCommandCode, {mine}, be32(kUnseal))), 0u);
  const Bytes digest = policy_digest(*a, mine);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < bs.size(); ++i) EXPECT_EQ(policy_digest(*b, bs[i]), digests[i]);
    EXPECT_EQ(policy_digest(*a, mine), digest);
  }
  EXPECT_NE(digest, digests[0]);  // A's PolicyCommandCode is in A's session only
}

// Sessions a closed client saved and left (kept for its peer) give way when
// the TPM's active sessions run out: another client's StartAuthSession
// succeeds, the oldest abandoned session flushed for it. On a chip with four
// active sessions (SlotLimitTransport).
TEST_F(SpaceTest, AbandonedSessionsGiveWayWhenTheTpmRunsOut) {
  SlotLimitTransport chip(*tpm_, SlotLimits{3, 3, 4, 255, "test", ""});
  ResourceManager manager(chip);
  ASSERT_TRUE(manager.start().ok());
  {
    HandleSpace a(manager, 1, {}, PeerIdentity{1000});
    for (int i = 0; i < 4; ++i) {
      const uint32_t h = start_session(a, se::kHmac);
      ASSERT_EQ(rc(a, plain(cmd::ContextSave::kInfo.code, {h})), 0u);
    }
  }
  HandleSpace b(manager, 2, {}, PeerIdentity{2000});
  EXPECT_NE(start_session(b, se::kHmac), 0u);
  EXPECT_NE(start_session(b, se::kHmac), 0u);
}

// Issue 38: the TPM's session handles shared between uids
// (src/resource_manager/fair_share.cc). On a chip with 16 (it says 64: the manager
// learns 16 from its first TPM_RC_SESSION_HANDLES), uid 1000 takes all 16;
// uid 2000 then gets its share, 7 of the 15 left beside the one kept for
// root, each taken from uid 1000, and no more; uid 1000, over its share, gets
// none back; root still gets one.
TEST_F(SpaceTest, NoUidHoldsMoreThanItsShareOfSessionHandlesWhileAnotherNeedsOne) {
  SlotLimitTransport chip(*tpm_, SlotLimits{3, 3, 16, 255, "test", ""});
  ResourceManager manager(chip, [this](const std::string& line) { log_ += line + "\n"; });
  ASSERT_TRUE(manager.start().ok());
  server::UidLimits limits;
  limits.max_sessions = 64;  // only the shares stand in the way
  manager.set_uid_limits(limits);
  const Bytes start = [] {
    cmd::StartAuthSession s;
    s.nonce_caller.bytes = Bytes(32, 1);
    Writer w;
    marshal_all(w, s.params());
    return plain(cmd::StartAuthSession::kInfo.code, {rh::kNull, rh::kNull}, *w.finish());
  }();
  std::vector<std::unique_ptr<HandleSpace>> a;
  for (server::ClientId id = 1; id <= 3; ++id) {
    a.push_back(std::make_unique<HandleSpace>(manager, id, ClientLimits{}, PeerIdentity{1000}));
  }
  size_t got_a = 0;
  for (auto& space : a) {
    for (int i = 0; i < 8; ++i) got_a += rc(*space, start) == 0 ? 1 : 0;
  }
  EXPECT_EQ(got_a, 16u);
  HandleSpace b(manager, 10, {}, PeerIdentity{2000});
  size_t got_b = 0;
  uint32_t refused = 0;
  for (int i = 0; i < 8 && (refused = rc(b, start)) == 0; ++i) ++got_b;
  EXPECT_EQ(got_b, 7u) << log_;
  EXPECT_EQ(refused, rc::kSessionHandles);
  EXPECT_EQ(listed(b, ht::kFirstLoadedSession).size() + listed(b, ht::kFirstSavedSession).size(), 7u);
  EXPECT_EQ(rc(*a[2], start), rc::kSessionHandles) << "uid 1000, over its share, got a handle back";
  HandleSpace root(manager, 11, {}, PeerIdentity{0});
  EXPECT_EQ(rc(root, start), 0u) << log_;
  EXPECT_NE(log_.find("over its share"), std::string::npos) << log_;
}

// Limits per client: objects and sessions beyond them are refused with the
// TPM's own memory codes, and nothing is left on the TPM.
TEST_F(SpaceTest, LimitsPerClient) {
  ClientLimits limits;
  limits.max_objects = 2;
  limits.max_sessions = 1;
  auto a = client({}, limits);
  primary(*a);
  primary(*a);
  Tpm tpm(*a);
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto third = tpm.run(c, {Auth::password()});
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().tpm_rc(), rc::kObjectMemory);
  start_session(*a, se::kHmac);
  cmd::StartAuthSession s;
  s.nonce_caller.bytes = Bytes(32, 1);
  auto second = tpm.run(s);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().tpm_rc(), rc::kSessionHandles);
  a.reset();
  EXPECT_TRUE(on_tpm().empty());
}

// What the server itself creates through a client's space (server_view():
// the session a CommandWrapper above the space puts on the client's
// commands) is the server's: it passes the client's authorization area
// untranslated, is never listed to the client, saved between its commands
// or flushed when it closes; the client cannot name it in a handle area,
// save or flush it.
TEST_F(SpaceTest, TheServersOwnSessionPassesThroughAndOutlivesTheClient) {
  auto a = client();
  const uint32_t own = start_session(a->server_view(), se::kHmac);
  ASSERT_NE(own, 0u);
  EXPECT_TRUE(listed(*a, ht::kFirstLoadedSession).empty());
  // The client's frame with the server's session in it reaches the TPM,
  // which judges the (missing) HMAC: the space did not refuse it.
  EXPECT_NE(rc(*a, in_session(kGetRandom, {}, own, Bytes{0, 8})), kSession1);
  EXPECT_EQ(rc(*a, plain(cmd::ContextSave::kInfo.code, {own})), kHandle1);
  EXPECT_EQ(rc(*a, plain(cmd::FlushContext::kInfo.code, {}, be32(own))), kParameter1);
  a.reset();
  const std::vector<uint32_t> held = on_tpm();
  ASSERT_EQ(held.size(), 1u);  // still loaded: never saved or flushed for a client
  EXPECT_EQ(held[0], own);
  auto b = client();
  EXPECT_EQ(rc(b->server_view(), plain(cmd::FlushContext::kInfo.code, {}, be32(own))), 0u);
  EXPECT_TRUE(on_tpm().empty());
}

// Every answer is hostile input: a bus that garbles the answers to the
// manager's own commands (ContextSave, ContextLoad, FlushContext) and to the
// clients' (cut short, sizes that lie, bytes appended, a wrong tag) leaves
// it consistent: each client gets a response back (or, where the manager
// refuses the answer, a lost one), never a handle outside its space, and
// once the clients closed nothing is kept.
TEST_F(SpaceTest, GarbledAnswersLeaveTheSpacesConsistent) {
  struct Garbling final : Transport {
    explicit Garbling(Transport& below) : below_(below) {}
    Result<Bytes> transmit(ByteView command) override {
      TPMSEC_ASSIGN_OR_RETURN(Bytes r, below_.transmit(command));
      state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
      switch ((state_ >> 33) % 8) {
        case 0:
          r.resize(std::min<size_t>(r.size(), (state_ >> 40) % 14));
          break;
        case 1:
          if (r.size() >= 6) store_be32(r.data() + 2, static_cast<uint32_t>(r.size() + 1 + (state_ >> 50) % 5000));
          break;
        case 2:
          r.insert(r.end(), {0xde, 0xad, 0xbe, 0xef});
          break;
        case 3:
          if (!r.empty()) r[0] ^= 0x7f;
          break;
        default:
          break;  // as the TPM answered
      }
      return r;
    }
    std::string describe() const override { return "garbling"; }
    Transport& below_;
    uint64_t state_ = 42;
  };
  Garbling bus(*tpm_);
  ResourceManager manager(bus);
  ASSERT_TRUE(manager.start(tpm_.get()).ok());
  {
    std::vector<std::unique_ptr<HandleSpace>> clients;
    for (server::ClientId id = 1; id <= 3; ++id)
      clients.push_back(std::make_unique<HandleSpace>(manager, id, ClientLimits{}, PeerIdentity{}));
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(rh::kNull);
    c.in_public.public_area = null_key_template(SaltKind::kEcc);
    const Bytes primary = password_command(cmd::CreatePrimary::kInfo.code, {rh::kNull}, [&] {
      Writer w;
      marshal_all(w, c.params());
      return *w.finish();
    }());
    cmd::StartAuthSession start;
    start.nonce_caller.bytes = Bytes(32, 1);
    const Bytes session = [&] {
      Writer w;
      marshal_all(w, start.params());
      return plain(cmd::StartAuthSession::kInfo.code, {rh::kNull, rh::kNull}, *w.finish());
    }();
    std::vector<uint32_t> given;
    size_t objects = 0, sessions = 0;
    for (int round = 0; round < 60; ++round) {
      for (auto& client : clients) {
        for (const Bytes& frame : {primary, session}) {
          auto r = client->transmit(frame);
          // An answer the manager will not give (a new handle a record
          // holds: a garbled FlushContext answer left it stale) is lost to
          // the client: the command ran, what it made is flushed.
          if (!r.ok()) {
            EXPECT_NE(r.error().message().find("lost"), std::string::npos) << r.error().message();
            continue;
          }
          HeaderRead h = read_frame_header(*r, SIZE_MAX);
          if (h.check == FrameCheck::kOk && h.header.size == r->size() && h.header.code == 0 && r->size() >= 14) {
            const uint32_t handle = load_be32(r->data() + 10);
            if ((handle >> 24) == ht::kTransient) EXPECT_EQ(handle >> 16, 0x80FFu) << std::hex << handle;
            ((handle >> 24) == ht::kTransient ? objects : sessions) += 1;
            given.push_back(handle);
          }
        }
        // What it was given, named back (flushes too, so the TPM keeps room).
        for (uint32_t h : given) (void)client->transmit(plain(cmd::FlushContext::kInfo.code, {}, be32(h)));
        given.clear();
      }
    }
    // Objects and sessions whose creating answer was garbled are the TPM's
    // and nobody's: swept when the TPM is full of them, so the clients keep
    // getting slots.
    EXPECT_GE(objects, 40u);
    EXPECT_GE(sessions, 40u);
  }
  EXPECT_EQ(manager.entries(), 0u);
}

}  // namespace
}  // namespace tpmsec
