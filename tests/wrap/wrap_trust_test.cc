// Nothing the wrapper decides rests on an answer no session authenticated
// (docs/tcti.md, "What rests on what"): an interposer on the bus forges the
// answers the wrapper reads before it wraps a command, and the caller must
// never get a command out without the wrapper's session, a secret in clear,
// nor a success for something that did not happen.
#include <gtest/gtest.h>

#include <vector>

#include "support/test_tpm.h"
#include "support/tpm_frames.h"
#include "support/wrap_fixture.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::contains;
using testing::WrapTest;

constexpr uint32_t kIndex = 0x01500031;
constexpr uint32_t kPersistent = 0x81000031;
constexpr uint16_t kNoSessionsTag = 0x8001;

// Which of the wrapper's name reads the interposer answers itself.
enum class Forged { kPlainRead, kAuditedRead };

class WrapTrustTest : public WrapTest {
 protected:
  // The interposer answers the wrapper's ReadPublic / NV_ReadPublic (the
  // plain one or the audited one) with `code`, and records every command
  // code that reached the TPM.
  void forge_name_reads(Forged which, uint32_t code) {
    rule_ = [this, which, code](ByteView c, Transport& tpm) -> Result<Bytes> {
      uint32_t cc = testing::command_code_of(c);
      bool plain = c.size() >= 2 && ((c[0] << 8) | c[1]) == kNoSessionsTag;
      bool name_read = cc == cc::kReadPublic || cc == cc::kNvReadPublic;
      if (name_read && plain == (which == Forged::kPlainRead)) return error_frame(code);
      reached_.push_back(cc);
      return tpm.transmit(c);
    };
  }
  bool reached(uint32_t code) const { return std::find(reached_.begin(), reached_.end(), code) != reached_.end(); }

  // An NV index holding `data`, made beside the wrapper (owner read/write).
  void define_index(ByteView data) {
    cmd::NvDefineSpace define;
    define.auth_handle = NamedHandle::of(rh::kOwner);
    define.public_info.nv_public.nv_index = kIndex;
    define.public_info.nv_public.name_alg = alg::kSha256;
    define.public_info.nv_public.attributes =
        0x00000002 /* TPMA_NV_OWNERWRITE */ | nv_attr::kOwnerRead | nv_attr::kNoDa;
    define.public_info.nv_public.data_size = static_cast<uint16_t>(data.size());
    ASSERT_TRUE(tpm().run(define, {Auth::password()}).ok());
    Writer w;
    w.tpm2b(data, "data");
    w.u16(0);
    NamedHandle owner = NamedHandle::of(rh::kOwner);
    NamedHandle index = index_handle();
    const NamedHandle* handles[] = {&owner, &index};
    Auth password = Auth::password();
    auto wrote = tpm().execute(*find_command(command_code("NV_Write")), handles, *w.finish(),
                               std::span<const Auth>(&password, 1));
    ASSERT_TRUE(wrote.ok()) << wrote.error().message();
  }
  NamedHandle index_handle() {
    auto nv = tpm().run(cmd::NvReadPublic{NamedHandle::of(kIndex)});
    EXPECT_TRUE(nv.ok()) << nv.error().message();
    return NamedHandle{kIndex, nv.ok() ? nv->nv_name.bytes : Bytes()};
  }
  Bytes index_data(uint16_t size) {
    auto r = tpm().run(cmd::NvRead{NamedHandle::of(rh::kOwner), index_handle(), size, 0}, {Auth::password()});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? r->data.bytes : Bytes();
  }
  void undefine_index() {
    auto r = tpm().run(cmd::NvUndefineSpace{NamedHandle::of(rh::kOwner), index_handle()}, {Auth::password()});
    EXPECT_TRUE(r.ok()) << r.error().message();
  }

  // A sealed object holding `secret`, loaded beside the wrapper; its handle.
  NamedHandle load_sealed(ByteView secret) {
    cmd::CreatePrimary p;
    p.primary_handle = NamedHandle::of(rh::kOwner);
    p.in_public.public_area = null_key_template(SaltKind::kEcc);
    auto primary = tpm().run(p, {Auth::password()});
    EXPECT_TRUE(primary.ok()) << primary.error().message();
    if (!primary.ok()) return {};
    NamedHandle parent{primary->object_handle, primary->name.bytes};
    cmd::Create c;
    c.parent_handle = parent;
    c.in_sensitive.data.assign(secret.begin(), secret.end());
    c.in_public.public_area.type = alg::kKeyedHash;
    c.in_public.public_area.name_alg = alg::kSha256;
    c.in_public.public_area.attributes = 0x00000452;  // fixedTPM fixedParent userWithAuth noDA
    auto created = tpm().run(c, {Auth::password()});
    EXPECT_TRUE(created.ok()) << created.error().message();
    cmd::Load l;
    l.parent_handle = parent;
    if (created.ok()) {
      l.in_private = created->out_private;
      l.in_public = created->out_public;
    }
    auto loaded = tpm().run(l, {Auth::password()});
    EXPECT_TRUE(loaded.ok()) << loaded.error().message();
    EXPECT_TRUE(tpm().flush(parent.handle).ok());
    return loaded.ok() ? NamedHandle{loaded->object_handle, loaded->name.bytes} : NamedHandle{};
  }

  std::vector<uint32_t> reached_;
};

// The critical case, for an NV index: a forged TPM_RC_HANDLE on
// either name read. The caller gets that error, numbered for its own handle
// (the index is NV_Read's second), and NV_Read never reaches the bus.
TEST_P(WrapTrustTest, AForgedErrorOnAnIndexsNameReadNeverSendsTheReadUnprotected) {
  const Bytes secret = *from_hex("a11ce5ec12e7000102030405060708090a0b0c0d0e0f");
  define_index(secret);
  for (Forged which : {Forged::kPlainRead, Forged::kAuditedRead}) {
    reached_.clear();
    forge_name_reads(which, rc::kHandle + 0x100);  // TPM_RC_HANDLE, handle 1
    auto r = caller_->run(
        cmd::NvRead{NamedHandle::of(rh::kOwner), NamedHandle::of(kIndex), static_cast<uint16_t>(secret.size()), 0},
        {Auth::password()});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind(), ErrorKind::kTpm) << r.error().message();
    EXPECT_EQ(r.error().tpm_rc(), rc::kHandle + 0x200) << r.error().message();
    EXPECT_FALSE(reached(cc::kNvRead));
    EXPECT_FALSE(contains(bus_bytes(), secret));
  }
  rule_ = nullptr;
  EXPECT_EQ(counts(cc::kNvRead).passed_through, 0u);
  undefine_index();
}

// A write that never happened is never reported done.
TEST_P(WrapTrustTest, AForgedErrorOnAnIndexsNameReadFailsTheWriteAndTheIndexKeepsItsData) {
  const Bytes before(16, 0x11), after(16, 0x22);
  define_index(before);
  forge_name_reads(Forged::kPlainRead, rc::kHandle + 0x100);
  Writer w;
  w.tpm2b(after, "data");
  w.u16(0);
  NamedHandle owner = NamedHandle::of(rh::kOwner), index = NamedHandle::of(kIndex);
  const NamedHandle* handles[] = {&owner, &index};
  Auth password = Auth::password();
  auto wrote = caller_->execute(*find_command(command_code("NV_Write")), handles, *w.finish(),
                                std::span<const Auth>(&password, 1));
  EXPECT_FALSE(wrote.ok());
  EXPECT_FALSE(reached(command_code("NV_Write")));
  EXPECT_FALSE(contains(bus_bytes(), after));
  rule_ = nullptr;
  EXPECT_EQ(index_data(16), before);
  undefine_index();
}

// The same for objects: transient (loaded beside the wrapper), brought back
// by the caller's own ContextLoad (whose answer is unauthenticated), and
// persistent. Unseal never reaches the bus, nor does the sealed secret.
TEST_P(WrapTrustTest, AForgedErrorOnAnObjectsNameReadNeverSendsTheUnsealUnprotected) {
  const Bytes secret = *from_hex("5ea1ed5ec2e70f0e0d0c0b0a09080706");
  NamedHandle sealed = load_sealed(secret);
  ASSERT_NE(sealed.handle, 0u);
  auto saved = tpm().run(cmd::ContextSave{sealed});
  ASSERT_TRUE(saved.ok()) << saved.error().message();
  auto reloaded = caller_->run(cmd::ContextLoad{saved->context});  // through the wrapper, passed through
  ASSERT_TRUE(reloaded.ok()) << reloaded.error().message();
  auto persisted = tpm().run(cmd::EvictControl{NamedHandle::of(rh::kOwner), sealed, kPersistent}, {Auth::password()});
  ASSERT_TRUE(persisted.ok()) << persisted.error().message();
  for (uint32_t handle : {sealed.handle, reloaded->loaded_handle, kPersistent}) {
    for (Forged which : {Forged::kPlainRead, Forged::kAuditedRead}) {
      reached_.clear();
      forge_name_reads(which, rc::kHandle + 0x100);
      auto r = caller_->run(cmd::Unseal{NamedHandle::of(handle)}, {Auth::password()});
      ASSERT_FALSE(r.ok()) << fmt::format("0x{:08x}", handle);
      EXPECT_EQ(r.error().tpm_rc(), rc::kHandle + 0x100) << r.error().message();
      EXPECT_FALSE(reached(cc::kUnseal)) << fmt::format("0x{:08x}", handle);
    }
  }
  // Unforged, each is unsealed under the wrapper's session, encrypted.
  rule_ = nullptr;
  for (uint32_t handle : {sealed.handle, reloaded->loaded_handle, kPersistent}) {
    auto r = caller_->run(cmd::Unseal{NamedHandle::of(handle)}, {Auth::password()});
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->out_data.bytes, secret);
  }
  EXPECT_EQ(counts(cc::kUnseal).passed_through, 0u);
  EXPECT_EQ(counts(cc::kUnseal).encrypted, 3u);
  EXPECT_FALSE(contains(bus_bytes(), secret));
  EXPECT_TRUE(tpm()
                  .run(cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle::of(kPersistent), kPersistent},
                       {Auth::password()})
                  .ok());
  EXPECT_TRUE(tpm().flush(sealed.handle).ok());
  EXPECT_TRUE(tpm().flush(reloaded->loaded_handle).ok());
}

// An answer that blames the wrapper's own session (not the caller's handle)
// is the wrapper's error: nothing of the caller's command goes out either.
TEST_P(WrapTrustTest, AForgedSessionErrorOnTheNameReadIsTheWrappersAndSendsNothing) {
  const Bytes secret(16, 0x5c);
  define_index(secret);
  forge_name_reads(Forged::kAuditedRead, rc::kAuthFail + 0x800 + 0x100);  // TPM_RC_AUTH_FAIL, session 1
  auto r = caller_->run(cmd::NvRead{NamedHandle::of(rh::kOwner), NamedHandle::of(kIndex), 16, 0}, {Auth::password()});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().kind(), ErrorKind::kTpm) << r.error().message();
  EXPECT_FALSE(reached(cc::kNvRead));
  rule_ = nullptr;
  undefine_index();
}

// A missing object is still the caller's TPM_RC_HANDLE (systemd probes its
// SRK with a ReadPublic): nothing forged, the TPM's own answer.
TEST_P(WrapTrustTest, AHandleTheTpmDoesNotHaveIsTheCallersHandleError) {
  auto r = caller_->run(cmd::ReadPublic{NamedHandle::of(0x81000099)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kTpm);
  EXPECT_EQ(rc_base(r.error().tpm_rc()), rc::kHandle) << r.error().message();
  EXPECT_EQ(counts(cc::kReadPublic).passed_through, 0u);
}

// A sequence object is named from HashSequenceStart's authenticated answer
// (the Empty Buffer) and its commands go out wrapped: the data it hashes
// encrypted, the digest the TPM's.
TEST_P(WrapTrustTest, ASequenceIsNamedFromItsAuthenticatedStartAndItsCommandsAreWrapped) {
  const CommandInfo& update = *find_command(command_code("SequenceUpdate"));
  const CommandInfo& complete = *find_command(command_code("SequenceComplete"));
  auto sequence = start_hash_sequence();
  ASSERT_TRUE(sequence.ok()) << sequence.error().message();
  const NamedHandle* handles[] = {&*sequence};
  Auth password = Auth::password();
  const std::string part1 = "first part of a secret-3f9a", part2 = "second part-77e1";
  Writer up;
  up.tpm2b(as_bytes(part1), "buffer");
  ASSERT_TRUE(caller_->execute(update, handles, *up.finish(), std::span<const Auth>(&password, 1)).ok());
  Writer cp;
  cp.tpm2b(as_bytes(part2), "buffer");
  cp.u32(rh::kNull);
  auto done = caller_->execute(complete, handles, *cp.finish(), std::span<const Auth>(&password, 1));
  ASSERT_TRUE(done.ok()) << done.error().message();
  Reader r(done->parameters);
  ByteView digest = r.tpm2b("result");
  auto expected = crypto::hash(alg::kSha256, {as_bytes(part1), as_bytes(part2)});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(Bytes(digest.begin(), digest.end()), *expected);
  for (const CommandInfo* info : {&update, &complete}) {
    EXPECT_EQ(counts(info->code).wrapped, 1u) << info->name;
    EXPECT_EQ(counts(info->code).encrypted, 1u) << info->name;
    EXPECT_EQ(counts(info->code).passed_through, 0u) << info->name;
  }
  EXPECT_FALSE(contains(bus_bytes(), as_bytes(part1)));
  EXPECT_FALSE(contains(bus_bytes(), as_bytes(part2)));
}

INSTANTIATE_TEST_SUITE_P(AllTransports, WrapTrustTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);

// Strict mode (wrap.h, set_strict): the caller's own HMAC session with a
// password cannot be re-signed, so NV_Read's data would come back in clear.
class StrictTest : public WrapTrustTest {
 protected:
  // An index with its own authValue, read under the caller's unsalted HMAC
  // session: the wrapper can audit it, not encrypt it.
  Result<cmd::NvRead::Response> read_with_own_session(ByteView index_auth, uint16_t size) {
    SessionOptions options;  // unsalted, unbound
    auto session = HmacSession::start(*caller_, options);
    if (!session.ok()) return session.error();
    NamedHandle index = index_handle();  // the caller's HMAC needs its Name
    cmd::NvRead read{index, index, size, 0};
    return caller_->run(read, {Auth{session->get(), index_auth}});
  }
  void define_with_auth(ByteView auth, ByteView data) {
    cmd::NvDefineSpace define;
    define.auth_handle = NamedHandle::of(rh::kOwner);
    define.auth.bytes.assign(auth.begin(), auth.end());
    define.public_info.nv_public.nv_index = kIndex;
    define.public_info.nv_public.name_alg = alg::kSha256;
    define.public_info.nv_public.attributes = nv_attr::kAuthWrite | nv_attr::kAuthRead | nv_attr::kNoDa;
    define.public_info.nv_public.data_size = static_cast<uint16_t>(data.size());
    ASSERT_TRUE(tpm().run(define, {Auth::password()}).ok());
    Writer w;
    w.tpm2b(data, "data");
    w.u16(0);
    NamedHandle index = index_handle();
    const NamedHandle* handles[] = {&index, &index};
    Auth password = Auth::password(auth);
    auto wrote = tpm().execute(*find_command(command_code("NV_Write")), handles, *w.finish(),
                               std::span<const Auth>(&password, 1));
    ASSERT_TRUE(wrote.ok()) << wrote.error().message();
  }
};

TEST_P(StrictTest, ASecretThatWouldComeBackInClearIsRefusedBeforeItIsSent) {
  const std::string_view password = "index-password-9d";
  const Bytes auth(password.begin(), password.end()), data(24, 0x6b);
  define_with_auth(auth, data);
  wrapper_->set_strict(true);
  reached_.clear();
  rule_ = [this](ByteView c, Transport& tpm) {
    reached_.push_back(testing::command_code_of(c));
    return tpm.transmit(c);
  };
  auto refused = read_with_own_session(auth, 24);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason(), ErrorReason::kSecretInClear) << refused.error().message();
  EXPECT_NE(refused.error().message().find("NV_Read"), std::string::npos) << refused.error().message();
  EXPECT_FALSE(reached(cc::kNvRead));
  EXPECT_EQ(counts(cc::kNvRead).refused, 1u);
  // What strict leaves alone: a secret the wrapper's session encrypts.
  auto random = caller_->run(cmd::GetRandom{16});
  EXPECT_TRUE(random.ok()) << random.error().message();
  // Without strict the read goes out audited, its data in clear (docs/tcti.md).
  wrapper_->set_strict(false);
  auto read = read_with_own_session(auth, 24);
  ASSERT_TRUE(read.ok()) << read.error().message();
  EXPECT_EQ(read->data.bytes, data);
  EXPECT_EQ(counts(cc::kNvRead).encrypted, 0u);
  rule_ = nullptr;
  undefine_index();
}

INSTANTIATE_TEST_SUITE_P(AllTransports, StrictTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);

// A policy session after PolicyPassword as go-tpm drives one (its
// PolicySession after tpm2.PolicyPassword, or the legacy package's
// UnsealWithSession): a fresh nonceCaller per command, the authValue in clear
// in the HMAC field, the TPM's answers with an empty HMAC.
class PolicyPasswordSession final : public Session {
 public:
  explicit PolicyPasswordSession(uint32_t handle) : handle_(handle) {}
  uint32_t handle() const override { return handle_; }
  Status begin_command() override {
    nonce_.resize(32);  // nonceTPM's size for a SHA-256 session started with 32
    return crypto::nonce_random().fill(nonce_);
  }
  Result<Bytes> authorize(const AuthorizeInput& in) override {
    return write_auth_entry(
        AuthEntry{.handle = handle_, .nonce = nonce_, .attributes = attr::kContinueSession, .hmac = in.auth_value},
        /*command=*/true);
  }
  Status verify(const VerifyInput& in) override {
    if (!in.auth.hmac.empty()) return integrity_error("a PolicyPassword session answered with an HMAC");
    if (in.auth.nonce.size() != 32) return integrity_error("a nonceTPM of another size");
    return ok_status();
  }

 private:
  uint32_t handle_;
  Bytes nonce_;
};

// go-tpm's seal/unseal and Sign flows with PolicyPassword (issue 38, item 3),
// their command sequence written with the project's codec: the objects'
// authPolicy is PolicyPassword's digest, which is PolicyAuthValue's.
class PolicyPasswordTest : public WrapTrustTest {
 protected:
  static constexpr std::string_view kPassword = "policy-password-5e";

  Bytes password() const { return Bytes(kPassword.begin(), kPassword.end()); }
  static Bytes policy_digest() {
    Writer cc;
    cc.u32(cc::kPolicyAuthValue);  // PolicyPassword's too (Part 3 TPM2_PolicyPassword)
    Bytes zeros(32, 0);
    auto d = crypto::hash(alg::kSha256, {zeros, *cc.finish()});
    return d.ok() ? *d : Bytes();
  }
  // The caller's primary (a password session, as go-tpm's CreatePrimary).
  NamedHandle caller_primary() {
    cmd::CreatePrimary p;
    p.primary_handle = NamedHandle::of(rh::kOwner);
    p.in_public.public_area = null_key_template(SaltKind::kEcc);
    auto primary = caller_->run(p, {Auth::password()});
    EXPECT_TRUE(primary.ok()) << primary.error().message();
    return primary.ok() ? NamedHandle{primary->object_handle, primary->name.bytes} : NamedHandle{};
  }
  // An object under the policy, created and loaded by the caller.
  NamedHandle caller_object(const NamedHandle& parent, Public pub, ByteView data) {
    cmd::Create c;
    c.parent_handle = parent;
    c.in_sensitive.user_auth = password();
    c.in_sensitive.data.assign(data.begin(), data.end());
    pub.name_alg = alg::kSha256;
    pub.auth_policy = policy_digest();
    c.in_public.public_area = pub;
    auto created = caller_->run(c, {Auth::password()});
    EXPECT_TRUE(created.ok()) << created.error().message();
    if (!created.ok()) return {};
    cmd::Load l;
    l.parent_handle = parent;
    l.in_private = created->out_private;
    l.in_public = created->out_public;
    auto loaded = caller_->run(l, {Auth::password()});
    EXPECT_TRUE(loaded.ok()) << loaded.error().message();
    return loaded.ok() ? NamedHandle{loaded->object_handle, loaded->name.bytes} : NamedHandle{};
  }
  static Public sealed_public() {
    Public pub;
    pub.type = alg::kKeyedHash;
    pub.attributes = 0x00000412;  // fixedTPM fixedParent noDA: policy only (no userWithAuth)
    return pub;
  }
  // PolicyPassword on `session`, through the wrapper: each use of a policy
  // session starts its policy again (Part 1 §19.7), as go-tpm does.
  void policy_password(uint32_t session) {
    NamedHandle s = NamedHandle::of(session);
    const NamedHandle* handles[] = {&s};
    auto policy = caller_->execute(*find_command(cc::kPolicyPassword), handles, {}, {});
    EXPECT_TRUE(policy.ok()) << policy.error().message();
  }
  // An unsalted, unbound policy session, started through the wrapper
  // (`through_wrapper`) or beside it, then PolicyPassword through it.
  uint32_t policy_password_session(bool through_wrapper) {
    cmd::StartAuthSession start;
    start.nonce_caller.bytes = Bytes(32, 0x5a);
    start.session_type = se::kPolicy;
    start.symmetric = SymDef{};
    auto started = (through_wrapper ? *caller_ : tpm()).run(start);
    EXPECT_TRUE(started.ok()) << started.error().message();
    if (!started.ok()) return 0;
    policy_password(started->session_handle);
    return started->session_handle;
  }
  Result<Bytes> unseal(const NamedHandle& item, uint32_t session) {
    PolicyPasswordSession s(session);
    auto r = caller_->run(cmd::Unseal{item}, {Auth{&s, password()}});
    if (!r.ok()) return r.error();
    return r->out_data.bytes;
  }
  bool bus_carried(uint32_t code) const {
    // Responses carry a response code where commands carry theirs: none of
    // these codes is one.
    return std::any_of(seen_.begin(), seen_.end(), [&](const Bytes& f) { return testing::command_code_of(f) == code; });
  }
};

TEST_P(PolicyPasswordTest, SealAndUnsealPutNeitherThePasswordNorTheSecretOnTheBus) {
  for (bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "strict" : "not strict");
    wrapper_->set_strict(strict);
    seen_.clear();
    const Bytes secret(24, strict ? 0x71 : 0x72);
    NamedHandle parent = caller_primary();
    NamedHandle item = caller_object(parent, sealed_public(), secret);
    uint32_t session = policy_password_session(/*through_wrapper=*/true);
    auto unsealed = unseal(item, session);
    ASSERT_TRUE(unsealed.ok()) << unsealed.error().message();
    EXPECT_EQ(*unsealed, secret);
    // Again on that session: its nonces roll through the wrapper.
    policy_password(session);
    auto again = unseal(item, session);
    ASSERT_TRUE(again.ok()) << again.error().message();
    EXPECT_EQ(*again, secret);
    const Bytes bus = bus_bytes();
    EXPECT_FALSE(contains(bus, password()));
    EXPECT_FALSE(contains(bus, secret));
    // PolicyPassword went out as PolicyAuthValue.
    EXPECT_FALSE(bus_carried(cc::kPolicyPassword));
    EXPECT_TRUE(bus_carried(cc::kPolicyAuthValue));
    EXPECT_GE(counts(cc::kUnseal).encrypted, 2u);
    EXPECT_EQ(counts(cc::kUnseal).passwords_left, 0u);
    EXPECT_TRUE(wrapper_->last_clear().what.empty()) << wrapper_->last_clear().what;
    EXPECT_TRUE(caller_->flush(session).ok());
    EXPECT_TRUE(caller_->flush(item.handle).ok());
    EXPECT_TRUE(caller_->flush(parent.handle).ok());
  }
  EXPECT_EQ(counts(cc::kUnseal).passwords_replaced, 4u);
}

TEST_P(PolicyPasswordTest, SignWithPolicyPasswordPutsNoPasswordOnTheBus) {
  wrapper_->set_strict(true);
  NamedHandle parent = caller_primary();
  Public pub;
  pub.type = alg::kKeyedHash;
  pub.attributes = 0x00040432;  // sign fixedTPM fixedParent sensitiveDataOrigin noDA
  pub.scheme = Scheme{alg::kHmac, alg::kSha256};
  seen_.clear();
  NamedHandle key = caller_object(parent, pub, {});
  uint32_t session = policy_password_session(/*through_wrapper=*/true);
  Writer sign;
  sign.tpm2b(Bytes(32, 0x33), "digest");
  sign.u16(alg::kNull);  // inScheme: the key's
  sign.u16(0x8024);      // validation: TPM_ST_HASHCHECK, a NULL ticket
  sign.u32(rh::kNull);
  sign.u16(0);
  PolicyPasswordSession s(session);
  const NamedHandle* handles[] = {&key};
  const Bytes pw = password(), wrong_pw = {'x'};
  Auth auth{&s, pw};
  auto signed_ =
      caller_->execute(*find_command(command_code("Sign")), handles, *sign.finish(), std::span<const Auth>(&auth, 1));
  ASSERT_TRUE(signed_.ok()) << signed_.error().message();
  EXPECT_GT(signed_->parameters.size(), 32u);
  EXPECT_FALSE(contains(bus_bytes(), password()));
  EXPECT_EQ(counts(command_code("Sign")).passwords_replaced, 1u);
  // A wrong password fails as it would have, with the TPM's authorization
  // error for the session (TPM_RC_BAD_AUTH: the key is noDA).
  policy_password(session);
  PolicyPasswordSession wrong_session(session);
  Auth wrong{&wrong_session, wrong_pw};
  Writer again;
  again.tpm2b(Bytes(32, 0x34), "digest");
  again.u16(alg::kNull);
  again.u16(0x8024);
  again.u32(rh::kNull);
  again.u16(0);
  auto refused =
      caller_->execute(*find_command(command_code("Sign")), handles, *again.finish(), std::span<const Auth>(&wrong, 1));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(rc_base(refused.error().tpm_rc()), rc::kBadAuth) << refused.error().message();
  EXPECT_TRUE(caller_->flush(session).ok());
}

TEST_P(PolicyPasswordTest, APasswordTheWrapperCannotResignIsRefusedUnderStrictAndCounted) {
  const Bytes secret(24, 0x73);
  NamedHandle parent = caller_primary();
  NamedHandle item = caller_object(parent, sealed_public(), secret);
  // Started beside the wrapper: it never saw its nonces.
  uint32_t session = policy_password_session(/*through_wrapper=*/false);
  EXPECT_TRUE(bus_carried(cc::kPolicyPassword));
  wrapper_->set_strict(true);
  seen_.clear();
  auto refused = unseal(item, session);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().reason(), ErrorReason::kSecretInClear) << refused.error().message();
  EXPECT_NE(refused.error().message().find("PolicyPassword"), std::string::npos) << refused.error().message();
  EXPECT_FALSE(bus_carried(cc::kUnseal));
  EXPECT_FALSE(contains(bus_bytes(), password()));
  EXPECT_EQ(counts(cc::kUnseal).refused, 1u);
  // Without strict it goes out, counted and told: the password in clear,
  // the unsealed data still encrypted by the wrapper's session.
  wrapper_->set_strict(false);
  auto unsealed = unseal(item, session);
  ASSERT_TRUE(unsealed.ok()) << unsealed.error().message();
  EXPECT_EQ(*unsealed, secret);
  EXPECT_TRUE(contains(bus_bytes(), password()));
  EXPECT_FALSE(contains(bus_bytes(), secret));
  EXPECT_EQ(counts(cc::kUnseal).passwords_left, 1u);
  EXPECT_EQ(counts(cc::kUnseal).secrets_left, 1u);
  EXPECT_NE(wrapper_->last_clear().what.find("PolicyPassword"), std::string::npos);
  EXPECT_NE(wrapper_->counts_report().find("Unseal 0x0000015e wrapped=1 encrypted=1 passed=0 passwords=0 "
                                           "clear-passwords=1 refused=1 clear-secrets=1"),
            std::string::npos)
      << wrapper_->counts_report();
  EXPECT_TRUE(tpm().flush(session).ok());
}

INSTANTIATE_TEST_SUITE_P(AllTransports, PolicyPasswordTest, testing::all_tpm_kinds(), testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
