// The command wrapper (tpmsec/wrap.h) against real TPMs, through the
// attacker's bus of support/wrap_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "support/test_tpm.h"
#include "support/tpm_frames.h"
#include "support/wrap_fixture.h"
#include "testing/transport_doubles.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/crypto.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/response_code.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/wire.h"
#include "tpmsec/wrap.h"

namespace tpmsec {
namespace {

using testing::contains;
using testing::kPcr;
using testing::WrapTest;

TEST_P(WrapTest, GetRandomIsEncryptedOnTheBus) {
  auto r = caller_->run(cmd::GetRandom{32});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->random_bytes.bytes.size(), 32u);
  EXPECT_FALSE(contains(bus_bytes(), r->random_bytes.bytes));
  EXPECT_EQ(counts(cc::kGetRandom).wrapped, 1u);
  EXPECT_EQ(counts(cc::kGetRandom).encrypted, 1u);
}

TEST_P(WrapTest, ExtendWithAPasswordGoesOutAsAnHmacAuthorization) {
  Bytes before = pcr_value();
  Bytes digest(32, 0x5a);
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, digest).ok());
  auto expected = pcr_extended_value(alg::kSha256, before, digest);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(pcr_value(), *expected);
  const WrapCounts& c = counts(cc::kPcrExtend);
  EXPECT_EQ(c.wrapped, 1u);
  EXPECT_EQ(c.passwords_replaced, 1u);
  EXPECT_EQ(c.passwords_left, 0u);
  // On the bus: the wrapper's session in the password's slot, no TPM_RS_PW.
  ASSERT_GE(seen_.size(), 1u);
  const Bytes& sent = seen_[seen_.size() - 2];
  EXPECT_EQ(testing::command_code_of(sent), cc::kPcrExtend);
  EXPECT_FALSE(contains(sent, be32(rh::kPasswordSession)));
  EXPECT_TRUE(contains(sent, be32(wrapper_->session_handle())));
}

TEST_P(WrapTest, APasswordNeverCrossesTheBus) {
  // An owner password set through the wrapper, then used through it.
  const std::string secret = "owner-secret-7f3a";
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kOwner);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  Writer params;
  params.tpm2b(as_bytes(secret), "newAuth");
  const NamedHandle owner = NamedHandle::of(rh::kOwner);
  const NamedHandle* handles[] = {&owner};
  const CommandInfo& kHierarchyChangeAuth = *find_command(0x129);
  Auth empty = Auth::password();
  auto changed = caller_->execute(kHierarchyChangeAuth, handles, *params.finish(), std::span<const Auth>(&empty, 1));
  ASSERT_TRUE(changed.ok()) << changed.error().message();
  auto created = caller_->run(c, {Auth::password(as_bytes(secret))});
  ASSERT_TRUE(created.ok()) << created.error().message();
  EXPECT_TRUE(caller_->flush(created->object_handle).ok());
  EXPECT_FALSE(contains(bus_bytes(), as_bytes(secret)));
  // The TPM really holds it: a direct password works, and is put back.
  Writer back;
  back.tpm2b({}, "newAuth");
  Auth with_secret = Auth::password(as_bytes(secret));
  auto restored = tpm().execute(kHierarchyChangeAuth, handles, *back.finish(), std::span<const Auth>(&with_secret, 1));
  EXPECT_TRUE(restored.ok()) << restored.error().message();
}

TEST_P(WrapTest, ObjectNamesComeFromAuthenticatedResponses) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kOwner);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto created = caller_->run(c, {Auth::password()});
  ASSERT_TRUE(created.ok()) << created.error().message();
  size_t before = seen_.size();
  // ReadPublic of the new object: its Name is known, no extra read goes out.
  auto read = caller_->run(cmd::ReadPublic{NamedHandle{created->object_handle, created->name.bytes}});
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->name.bytes, created->name.bytes);
  EXPECT_EQ(seen_.size(), before + 2);
  EXPECT_EQ(counts(cc::kReadPublic).wrapped, 1u);
  EXPECT_TRUE(caller_->flush(created->object_handle).ok());
}

TEST_P(WrapTest, AnUnknownObjectIsNamedByAnAuditedRead) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kOwner);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto created = tpm().run(c, {Auth::password()});  // not through the wrapper
  ASSERT_TRUE(created.ok()) << created.error().message();
  auto read = caller_->run(cmd::ReadPublic{NamedHandle{created->object_handle, created->name.bytes}});
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->name.bytes, created->name.bytes);
  // The plain read, the audited one, then the caller's.
  EXPECT_EQ(wrapper_->counts().at(cc::kReadPublic).wrapped, 1u);
  EXPECT_TRUE(tpm().flush(created->object_handle).ok());
}

TEST_P(WrapTest, ASwappedExtendDigestIsRefusedByTheTpm) {
  Bytes before = pcr_value();
  Bytes digest(32, 0x11), forged(32, 0x66);
  rule_ = [&](ByteView c, Transport& tpm) -> Result<Bytes> {
    Bytes frame(c.begin(), c.end());
    if (testing::command_code_of(c) == cc::kPcrExtend) {
      auto at = std::search(frame.begin(), frame.end(), digest.begin(), digest.end());
      if (at != frame.end()) std::copy(forged.begin(), forged.end(), at);
    }
    return tpm.transmit(frame);
  };
  Status st = pcr_extend(*caller_, alg::kSha256, kPcr, digest);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kTpm) << st.error().message();
  EXPECT_EQ(pcr_value(), before);
  rule_ = nullptr;
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, digest).ok());
  EXPECT_EQ(pcr_value(), *pcr_extended_value(alg::kSha256, before, digest));
}

TEST_P(WrapTest, AForgedResponseNeverReachesTheCaller) {
  rule_ = [&](ByteView c, Transport& tpm) -> Result<Bytes> {
    auto r = tpm.transmit(c);
    if (!r.ok() || testing::command_code_of(c) != cc::kGetRandom) return r;
    Bytes forged = *r;
    forged[forged.size() - 40] ^= 1;  // a byte of the (encrypted) random bytes
    return forged;
  };
  auto r = caller_->run(cmd::GetRandom{32});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity) << r.error().message();
  // The next command runs on a new session.
  rule_ = nullptr;
  auto again = caller_->run(cmd::GetRandom{32});
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(wrapper_->sessions_started(), 2u);
}

TEST_P(WrapTest, ALostResponseIsAnErrorAndNeverAppliedTwice) {
  Bytes before = pcr_value();
  Bytes digest(32, 0x22);
  rule_ = [&](ByteView c, Transport& tpm) -> Result<Bytes> {
    auto r = tpm.transmit(c);
    if (testing::command_code_of(c) == cc::kPcrExtend) return runtime_error("response lost");
    return r;
  };
  Status st = pcr_extend(*caller_, alg::kSha256, kPcr, digest);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kRuntime);
  Bytes once = *pcr_extended_value(alg::kSha256, before, digest);
  EXPECT_EQ(pcr_value(), once);
  rule_ = nullptr;
  auto r = caller_->run(cmd::GetRandom{8});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(wrapper_->sessions_started(), 2u);
  EXPECT_EQ(pcr_value(), once);
}

TEST_P(WrapTest, TheCallerFlushingTheSessionStartsAnother) {
  ASSERT_TRUE(caller_->run(cmd::GetRandom{8}).ok());
  uint32_t first = wrapper_->session_handle();
  ASSERT_NE(first, 0u);
  // As tpm2_flushcontext -s does: FlushContext of every loaded session.
  auto flushed = caller_->run(cmd::FlushContext{first});
  ASSERT_TRUE(flushed.ok()) << flushed.error().message();
  EXPECT_EQ(counts(cc::kFlushContext).passed_through, 1u);
  auto r = caller_->run(cmd::GetRandom{8});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(wrapper_->sessions_started(), 2u);
}

TEST_P(WrapTest, ASessionFlushedBehindItsBackIsReplacedForTheNextCommand) {
  ASSERT_TRUE(caller_->run(cmd::GetRandom{8}).ok());
  uint32_t first = wrapper_->session_handle();
  // Another client flushes it.
  ASSERT_TRUE(testing::succeeded(transport().transmit(*[&] {
    Writer w;
    w.u16(st::kNoSessions);
    w.u32(14);
    w.u32(cc::kFlushContext);
    w.u32(first);
    return w.finish();
  }())));
  // GetRandom is retry_safe: resent once on a new session.
  auto r = caller_->run(cmd::GetRandom{8});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(wrapper_->sessions_started(), 2u);
  // PCR_Extend is not: the TPM's error goes to the caller, the next one works.
  ASSERT_TRUE(testing::succeeded(transport().transmit(*[&] {
    Writer w;
    w.u16(st::kNoSessions);
    w.u32(14);
    w.u32(cc::kFlushContext);
    w.u32(wrapper_->session_handle());
    return w.finish();
  }())));
  Bytes before = pcr_value();
  Status st = pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 3));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kTpm);
  EXPECT_EQ(pcr_value(), before);
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 3)).ok());
  EXPECT_EQ(wrapper_->sessions_started(), 3u);
}

// A caller's session that ends with its command (continueSession clear) frees
// its handle, and the TPM gives it to the next session: the wrapper's own new
// one must not be refused as "already in use".
TEST_P(WrapTest, ACallersEndedSessionsHandleMayBeTheWrappersNext) {
  ASSERT_TRUE(caller_->run(cmd::GetRandom{8}).ok());
  uint32_t first = wrapper_->session_handle();
  auto ending = HmacSession::start(*caller_, SessionOptions{});
  ASSERT_TRUE(ending.ok()) << ending.error().message();
  uint32_t freed = (*ending)->handle();
  (*ending)->set_attributes(0);  // continueSession clear: the TPM ends it with the command
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 9), Auth{ending->get(), {}}).ok());
  ASSERT_TRUE(caller_->run(cmd::FlushContext{first}).ok());
  // Another client takes the lowest free slot, the wrapper's old one.
  auto other = HmacSession::start(tpm(), SessionOptions{});
  ASSERT_TRUE(other.ok()) << other.error().message();
  ASSERT_EQ((*other)->handle(), first);
  auto r = caller_->run(cmd::GetRandom{8});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(wrapper_->session_handle(), freed);
}

// TPM_RC_SESSION_MEMORY is not authenticated: forged, it makes the wrapper
// send a caller's StartAuthSession again, wrapped as before, and goes back to
// the caller unanswered for a command that may change something.
TEST_P(WrapTest, AForgedSessionMemoryErrorNeverSendsACommandWithoutTheSession) {
  ASSERT_TRUE(caller_->run(cmd::GetRandom{8}).ok());
  auto forge_first = [](uint32_t code) {
    return [code, done = false](ByteView c, Transport& inner) mutable -> Result<Bytes> {
      if (!done && c.size() >= kFrameHeaderBytes && load_be32(c.data() + 6) == code) {
        done = true;
        Writer w;
        w.u16(st::kNoSessions);
        w.u32(10);
        w.u32(rc::kSessionMemory);
        return *w.finish();
      }
      return inner.transmit(c);
    };
  };
  rule_ = forge_first(cc::kStartAuthSession);
  auto session = HmacSession::start(*caller_, SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.error().message();
  EXPECT_EQ(counts(cc::kStartAuthSession).wrapped, 2u);
  EXPECT_EQ(counts(cc::kStartAuthSession).passed_through, 0u);
  rule_ = forge_first(cc::kPcrExtend);
  Bytes before = pcr_value();
  Status st = pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 7));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().tpm_rc(), rc::kSessionMemory);
  EXPECT_EQ(pcr_value(), before);
  EXPECT_EQ(counts(cc::kPcrExtend).wrapped, 1u);
  EXPECT_EQ(counts(cc::kPcrExtend).passed_through, 0u);
}

// Room for the wrapper's session comes only from the caller's own sessions:
// another client's stay loaded, even when the caller's command then finds no
// slot (as it would have beside that client without the wrapper, one session
// later).
TEST_P(WrapTest, AnotherClientsSessionsAreNeverSavedToMakeRoom) {
  ASSERT_TRUE(caller_->run(cmd::GetRandom{8}).ok());
  auto x = HmacSession::start(tpm(), SessionOptions{});
  auto y = HmacSession::start(tpm(), SessionOptions{});
  ASSERT_TRUE(x.ok() && y.ok());
  seen_.clear();
  auto mine = HmacSession::start(*caller_, SessionOptions{});
  ASSERT_FALSE(mine.ok());
  EXPECT_EQ(mine.error().tpm_rc(), rc::kSessionMemory);
  for (const Bytes& frame : seen_) {
    bool save = frame.size() >= 14 && load_be32(frame.data() + 6) == cc::kContextSave;
    EXPECT_FALSE(save &&
                 (load_be32(frame.data() + 10) == (*x)->handle() || load_be32(frame.data() + 10) == (*y)->handle()))
        << "saved another client's session";
  }
  auto loaded = tpm().list_handles(ht::kFirstHmacSession);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_NE(std::find(loaded->begin(), loaded->end(), (*x)->handle()), loaded->end());
  EXPECT_NE(std::find(loaded->begin(), loaded->end(), (*y)->handle()), loaded->end());
}

TEST_P(WrapTest, AnErrorResponseIsTheCallersUnchanged) {
  // PCR 30 does not exist: the same code as without the wrapper.
  auto direct = tpm().run(cmd::PcrReset{NamedHandle::of(30)}, {Auth::password()});
  auto wrapped = caller_->run(cmd::PcrReset{NamedHandle::of(30)}, {Auth::password()});
  ASSERT_FALSE(direct.ok());
  ASSERT_FALSE(wrapped.ok());
  EXPECT_EQ(wrapped.error().tpm_rc(), direct.error().tpm_rc());
}

TEST_P(WrapTest, ACallersHmacSessionKeepsItsParametersInClearAndIsAudited) {
  ProtectionConfig config;
  config.trust_first_use = true;
  auto callers_factory = SessionFactory::create(*caller_, config);
  ASSERT_TRUE(callers_factory.ok()) << callers_factory.error().message();
  auto session = (*callers_factory)->start(attr::kContinueSession);
  ASSERT_TRUE(session.ok()) << session.error().message();
  Bytes before = pcr_value();
  Bytes digest(32, 0x44);
  Status st = pcr_extend(*caller_, alg::kSha256, kPcr, digest, Auth{session->get(), {}});
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(pcr_value(), *pcr_extended_value(alg::kSha256, before, digest));
  const WrapCounts& c = counts(cc::kPcrExtend);
  EXPECT_EQ(c.wrapped, 1u);
  EXPECT_EQ(c.encrypted, 0u);
  EXPECT_EQ(c.passwords_replaced, 0u);
  // The caller's own audit session: one per command may audit, so the
  // command passes through as the caller sent it.
  (*session)->set_attributes(attr::kContinueSession | attr::kAudit);
  auto random = caller_->run(cmd::GetRandom{16}, {Auth{session->get(), {}}});
  ASSERT_TRUE(random.ok()) << random.error().message();
  EXPECT_EQ(counts(cc::kGetRandom).passed_through, 1u);
}

// tpm2-pkcs11's shape: the caller's own salted session with encrypt loads
// an object, so the Load's answer, the object's Name, is the caller's
// ciphertext. The object is named by the public area the TPM loaded under
// the wrapper's cpHash: the next command naming it goes out wrapped with no
// Name read first, and the TPM accepts the wrapper's HMAC over that Name.
TEST_P(WrapTest, AnObjectLoadedUnderTheCallersEncryptingSessionIsNamedByItsPublicArea) {
  ProtectionConfig config;
  config.trust_first_use = true;
  auto callers_factory = SessionFactory::create(*caller_, config);
  ASSERT_TRUE(callers_factory.ok()) << callers_factory.error().message();
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kOwner);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto primary = caller_->run(c, {Auth::password()});
  ASSERT_TRUE(primary.ok()) << primary.error().message();
  cmd::Create child;
  child.parent_handle = NamedHandle{primary->object_handle, primary->name.bytes};
  child.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto made = caller_->run(child, {Auth::password()});
  ASSERT_TRUE(made.ok()) << made.error().message();
  auto session = (*callers_factory)->start(attr::kContinueSession | attr::kEncrypt);
  ASSERT_TRUE(session.ok()) << session.error().message();
  auto loaded =
      caller_->run(cmd::Load{child.parent_handle, made->out_private, made->out_public}, {Auth{session->get(), {}}});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  const size_t before = seen_.size();
  auto read = caller_->run(cmd::ReadPublic{NamedHandle{loaded->object_handle, loaded->name.bytes}});
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->name.bytes, loaded->name.bytes);
  EXPECT_EQ(seen_.size(), before + 2);  // the caller's ReadPublic and its answer, once
  EXPECT_EQ(counts(cc::kReadPublic).wrapped, 1u);
  EXPECT_TRUE(caller_->flush(loaded->object_handle).ok());
  EXPECT_TRUE(caller_->flush(primary->object_handle).ok());
}

// As tpm2-tools 5.4 authorizes NV_DefineSpace, Create, Unseal: an unsalted,
// unbound HMAC session of the caller's, with the owner's empty authValue.
class ResignTest : public WrapTest {
 protected:
  std::unique_ptr<HmacSession> unsalted_session() {
    SessionOptions options;  // no salt key, no bind: the session key is empty
    auto s = HmacSession::start(*caller_, options);
    EXPECT_TRUE(s.ok()) << s.error().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  Status define(const Auth& auth, ByteView index_auth) {
    cmd::NvDefineSpace define;
    define.auth_handle = NamedHandle::of(rh::kOwner);
    define.auth.bytes.assign(index_auth.begin(), index_auth.end());
    define.public_info.nv_public.nv_index = kIndex;
    define.public_info.nv_public.attributes = nv_attr::kAuthWrite | nv_attr::kAuthRead | nv_attr::kNoDa;
    define.public_info.nv_public.data_size = 8;
    return status_of(caller_->run(define, {auth}));
  }
  void undefine() {
    auto nv = tpm().run(cmd::NvReadPublic{NamedHandle::of(kIndex)});
    ASSERT_TRUE(nv.ok()) << nv.error().message();
    auto r = tpm().run(cmd::NvUndefineSpace{NamedHandle::of(rh::kOwner), NamedHandle{kIndex, nv->nv_name.bytes}},
                       {Auth::password()});
    EXPECT_TRUE(r.ok()) << r.error().message();
  }
  static constexpr uint32_t kIndex = 0x01500020;
};

TEST_P(ResignTest, TheCallersSessionWithAnEmptyAuthValueIsReSignedAndTheParameterEncrypted) {
  auto session = unsalted_session();
  ASSERT_TRUE(session);
  const Bytes secret = *from_hex("5e5e5e5e0123456789abcdef5e5e5e5e");
  ASSERT_TRUE(define(Auth{session.get(), {}}, secret).ok());
  const WrapCounts& c = counts(cc::kNvDefineSpace);
  EXPECT_EQ(c.wrapped, 1u);
  EXPECT_EQ(c.encrypted, 1u);
  EXPECT_FALSE(contains(bus_bytes(), secret));
  // The caller's session goes on: its nonces rolled as the TPM's did.
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 7), Auth{session.get(), {}}).ok());
  undefine();
}

TEST_P(ResignTest, WithAPasswordTheCallersHmacStandsAndNothingIsEncrypted) {
  // The owner's authValue is not empty: the caller's HMAC key is unknown to
  // the wrapper, which audits only. (HierarchyChangeAuth re-signed under the
  // new authValue is tcti_test's, with ESYS as the caller: tpmsec's own Tpm
  // checks that response under the old one.)
  const Bytes owner = *from_hex("6f776e65722d6e65772d61757468");
  Writer params;
  params.tpm2b(owner, "newAuth");
  const NamedHandle owner_handle = NamedHandle::of(rh::kOwner);
  const NamedHandle* handles[] = {&owner_handle};
  const CommandInfo& kHierarchyChangeAuth = *find_command(0x129);
  Auth empty = Auth::password();
  ASSERT_TRUE(tpm().execute(kHierarchyChangeAuth, handles, *params.finish(), std::span<const Auth>(&empty, 1)).ok());
  auto session = unsalted_session();
  const Bytes secret = *from_hex("7a7a7a7a0123456789abcdef7a7a7a7a");
  Status st = session ? define(Auth{session.get(), owner}, secret) : Status(usage_error("no session"));
  EXPECT_TRUE(st.ok()) << st.error().message();
  Writer back;
  back.tpm2b({}, "newAuth");
  Auth with_owner = Auth::password(owner);
  ASSERT_TRUE(tpm().execute(kHierarchyChangeAuth, handles, *back.finish(), std::span<const Auth>(&with_owner, 1)).ok());
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(counts(cc::kNvDefineSpace).wrapped, 1u);
  EXPECT_EQ(counts(cc::kNvDefineSpace).encrypted, 0u);
  undefine();
}

TEST_P(ResignTest, AForgedResponseEntryOfTheCallersSessionIsRefused) {
  auto session = unsalted_session();
  ASSERT_TRUE(session);
  rule_ = [&](ByteView c, Transport& tpm) -> Result<Bytes> {
    auto r = tpm.transmit(c);
    if (!r.ok() || testing::command_code_of(c) != cc::kNvDefineSpace || r->size() < 12) return r;
    Bytes forged = *r;
    // The wrapper's entry comes last (2+32 nonce, attributes, 2+32 HMAC):
    // the byte before it is the last of the caller's HMAC.
    forged[forged.size() - 70] ^= 1;
    return forged;
  };
  Status st = define(Auth{session.get(), {}}, Bytes(16, 0x41));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().kind(), ErrorKind::kIntegrity) << st.error().message();
  EXPECT_NE(st.error().message().find("the caller's session"), std::string::npos) << st.error().message();
  rule_ = nullptr;
  undefine();
}

INSTANTIATE_TEST_SUITE_P(AllTransports, ResignTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);

// The codes of the commands the bus carried (responses left out).
std::vector<uint32_t> command_codes(const std::vector<Bytes>& seen) {
  std::vector<uint32_t> codes;
  for (size_t i = 0; i < seen.size(); i += 2) {
    auto f = testing::parse_command(seen[i]);
    codes.push_back(f.ok() ? f->code : 0);
  }
  return codes;
}

// A program that never sends a secret (tpm2_pcrextend) pays for no cipher
// check: the null key is loaded, the session salted to it, the key flushed,
// the extend goes out in the session; nothing else.
TEST_P(WrapTest, AnExtendAloneSendsNoCipherCheck) {
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 0x11)).ok());
  EXPECT_EQ(command_codes(seen_),
            (std::vector<uint32_t>{cc::kContextLoad, cc::kStartAuthSession, cc::kFlushContext, cc::kPcrExtend}));
}

// StartAuthSession's symmetric definition is covered by no HMAC. An
// interposer that turns the wrapper's AES-128 into AES-256 makes the two
// sides encrypt with different keys while every HMAC still verifies. The
// deferred cipher check catches it before the first command that carries a
// parameter encrypted: GetRandom never goes out, the caller gets an error,
// and the session is gone from the TPM.
TEST_P(WrapTest, ARewrittenSessionCipherIsRefusedBeforeTheFirstEncryptedCommand) {
  bool rewritten = false;
  rule_ = [&rewritten](ByteView c, Transport& tpm) -> Result<Bytes> {
    auto f = testing::parse_command(c);
    if (!f.ok() || f->code != cc::kStartAuthSession) return tpm.transmit(c);
    // nonceCaller, encryptedSalt, sessionType, then symmetric: algorithm, keyBits.
    Bytes& p = f->parameters;
    Reader r(p);
    r.tpm2b("nonceCaller", 64);
    r.tpm2b("encryptedSalt");
    r.u8("sessionType");
    r.u16("symmetric.algorithm");
    size_t at = r.offset();
    if (r.u16("symmetric.keyBits") != 128 || !r.ok()) return tpm.transmit(c);
    p[at] = 0x01;  // 256
    p[at + 1] = 0x00;
    rewritten = true;
    return tpm.transmit(testing::build_command(*f));
  };
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 0x22)).ok()) << "no parameter encrypted yet";
  auto r = caller_->run(cmd::GetRandom{32});
  ASSERT_TRUE(rewritten);
  ASSERT_FALSE(r.ok()) << "random bytes decrypted with the wrong key were returned";
  EXPECT_EQ(r.error().kind(), ErrorKind::kIntegrity) << r.error().message();
  std::vector<uint32_t> codes = command_codes(seen_);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), cc::kGetRandom), 0);
  EXPECT_EQ(std::count(codes.begin(), codes.end(), cc::kHash), 1);
  EXPECT_EQ(wrapper_->session_handle(), 0u);
  auto left = tpm().list_handles(ht::kFirstLoadedSession);
  ASSERT_TRUE(left.ok()) << left.error().message();
  EXPECT_TRUE(left->empty()) << "the rewritten session was left on the TPM";
}

// A front end that expects the program's last command (end_session_with(),
// as the TCTI does for a program that sent as many the last time): the TPM
// ends the session with it, no FlushContext follows, nothing is left loaded.
TEST_P(WrapTest, TheSessionEndsWithTheCommandTheFrontEndNamed) {
  wrapper_->end_session_with(2);
  ASSERT_TRUE(caller_->run(cmd::GetRandom{8}).ok());
  EXPECT_NE(wrapper_->session_handle(), 0u);
  Bytes before = pcr_value();
  Bytes digest(32, 0x21);
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, digest).ok());
  EXPECT_EQ(pcr_value(), *pcr_extended_value(alg::kSha256, before, digest));
  EXPECT_EQ(wrapper_->commands(), 2u);
  EXPECT_EQ(wrapper_->session_handle(), 0u);
  auto left = tpm().list_handles(ht::kFirstLoadedSession);
  ASSERT_TRUE(left.ok()) << left.error().message();
  EXPECT_TRUE(left->empty()) << "the TPM kept the session";
  size_t sent = seen_.size();
  end_wrapper();
  EXPECT_EQ(seen_.size(), sent) << "a FlushContext after the session ended";
}

// Whatever the ending command answers reaches the caller as the TPM gave it
// (tpm2_flushcontext -t -l -s lists three handle ranges; the third ends the
// session).
TEST_P(WrapTest, TheEndingCommandsAnswerIsTheCallersUnchanged) {
  auto first = HmacSession::start(*caller_, SessionOptions{});
  ASSERT_TRUE(first.ok()) << first.error().message();
  auto saved = (*first)->save(*caller_);
  ASSERT_TRUE(saved.ok()) << saved.error().message();
  wrapper_->end_session_with(wrapper_->commands() + 3);
  std::vector<std::vector<uint32_t>> through, direct;
  for (uint32_t range : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
    auto l = caller_->list_handles(range);
    ASSERT_TRUE(l.ok()) << l.error().message();
    through.push_back(*l);
  }
  for (uint32_t range : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
    auto l = tpm().list_handles(range);
    ASSERT_TRUE(l.ok()) << l.error().message();
    direct.push_back(*l);
  }
  EXPECT_EQ(wrapper_->session_handle(), 0u);
  EXPECT_EQ(through, direct);
}

// The guess was short: the command after it gets a new session, which lasts
// to the end and is flushed then; every command applied once.
TEST_P(WrapTest, ACommandAfterTheNamedLastOneGetsANewSession) {
  wrapper_->end_session_with(1);
  Bytes before = pcr_value();
  Bytes digest(32, 0x23);
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, digest).ok());
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, digest).ok());
  ASSERT_TRUE(pcr_extend(*caller_, alg::kSha256, kPcr, digest).ok());
  Bytes expected = before;
  for (int i = 0; i < 3; ++i) expected = *pcr_extended_value(alg::kSha256, expected, digest);
  EXPECT_EQ(pcr_value(), expected);
  EXPECT_EQ(wrapper_->sessions_started(), 2u);
  EXPECT_NE(wrapper_->session_handle(), 0u);
  end_wrapper();
  auto left = tpm().list_handles(ht::kFirstLoadedSession);
  ASSERT_TRUE(left.ok()) << left.error().message();
  EXPECT_TRUE(left->empty()) << "the second session was left on the TPM";
}

// continueSession is in both HMACs. An interposer that sets it on the ending
// command (to leave the session behind once the wrapper stops tracking it)
// makes the TPM refuse the command; one that sets it in the response (so the
// wrapper stops tracking a session the TPM ended, or the other way round) is
// refused by the wrapper. Either way the PCR is unchanged and no session is
// left on the TPM.
TEST_P(WrapTest, AFlippedContinueSessionNeverLeavesTheSessionBehind) {
  for (bool in_response : {false, true}) {
    SCOPED_TRACE(in_response ? "flipped in the response" : "flipped in the command");
    ASSERT_NO_FATAL_FAILURE(TearDown());
    ASSERT_NO_FATAL_FAILURE(SetUp());
    wrapper_->end_session_with(1);
    bool flipped = false;
    rule_ = [&flipped, in_response](ByteView c, Transport& inner) -> Result<Bytes> {
      bool extend = testing::command_code_of(c) == cc::kPcrExtend;
      if (!extend) return inner.transmit(c);
      if (!in_response) {
        auto f = testing::parse_command(c);
        if (!f.ok()) return f.error();
        for (auto& e : f->sessions) {
          if (e.handle != rh::kPasswordSession) e.attributes |= attr::kContinueSession;
        }
        flipped = true;
        return inner.transmit(testing::build_command(*f));
      }
      TPMSEC_ASSIGN_OR_RETURN(Bytes r, inner.transmit(c));
      auto f = testing::parse_response(r, cc::kPcrExtend);
      if (!f.ok() || f->sessions.empty()) return r;
      f->sessions[0].attributes |= attr::kContinueSession;
      flipped = true;
      return testing::build_response(*f);
    };
    Bytes before = pcr_value();
    Status st = pcr_extend(*caller_, alg::kSha256, kPcr, Bytes(32, 0x25));
    ASSERT_TRUE(flipped);
    ASSERT_FALSE(st.ok()) << "the flipped attribute went unnoticed";
    if (!in_response) EXPECT_EQ(pcr_value(), before);
    rule_ = nullptr;
    end_wrapper();
    auto left = tpm().list_handles(ht::kFirstLoadedSession);
    ASSERT_TRUE(left.ok()) << left.error().message();
    EXPECT_TRUE(left->empty()) << "a session was left on the TPM";
  }
}

// SequenceComplete ends the caller's hash sequence (TPMA_CC.flushed), and the
// TPM gives its number to the next object: the null key of the wrapper's
// next session must not be refused as "already in use" (tpm2-openssl signs
// through a hash sequence, then its session ends: tests/tcti/tcti_test.cc).
TEST_P(WrapTest, ACompletedSequencesHandleMayBeTheWrappersNextKey) {
  const CommandInfo& complete = *find_command(command_code("SequenceComplete"));
  auto sequence = start_hash_sequence();
  ASSERT_TRUE(sequence.ok()) << sequence.error().message();
  const NamedHandle* handles[] = {&*sequence};
  Writer cp;
  cp.tpm2b(as_bytes(std::string_view("data")), "buffer");
  cp.u32(rh::kNull);
  Auth password = Auth::password();
  auto done = caller_->execute(complete, handles, *cp.finish(), std::span<const Auth>(&password, 1));
  ASSERT_TRUE(done.ok()) << done.error().message();
  // A new session for the next command: its null key is loaded again.
  ASSERT_TRUE(caller_->run(cmd::FlushContext{wrapper_->session_handle()}).ok());
  auto r = caller_->run(cmd::GetRandom{8});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(wrapper_->sessions_started(), 2u);
}

TEST_P(WrapTest, CountsReportNamesEachCommand) {
  ASSERT_TRUE(caller_->run(cmd::GetRandom{8}).ok());
  EXPECT_NE(wrapper_->counts_report().find("GetRandom 0x0000017b wrapped=1 encrypted=1 passed=0"), std::string::npos)
      << wrapper_->counts_report();
}

INSTANTIATE_TEST_SUITE_P(AllTransports, WrapTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
