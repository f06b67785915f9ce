// The active interposer (issue 10): the real tpmsec binary against a real
// swtpm, through a TCP man in the middle (support/interposer.h) that
// rewrites, forges, replays, injects and drops, and through an attacker that
// owns its own salt key (support/attacker.h).
//
// What every scenario checks is the outcome an operator sees and the state of
// the TPM, read straight from swtpm (never through the interposer): the exit
// code (3 for an integrity failure, 2 for a refused command), the PCR value
// recomputed with OpenSSL, and the handles left loaded. Never exit 0 with a
// PCR the attacker chose, never a flushed handle of another client, never a
// leaked handle.
//
// Scenarios and the outcome each must have:
//   a. forged identity (TPM_PT_MANUFACTURER etc.) + swapped extend digest: exit 3, PCR unchanged
//   b. null-key substitution by an attacker with its own key: exit 3 against
//      --null-name or a genuine --tofu pin, exit 2 without an anchor; PCR unchanged
//   c. forged StartAuthSession (nonceTPM, handle): exit 3, PCR unchanged
//   d. forged error after the extend executed: extended exactly once (exit 0) or at most once
//   e. replayed audit responses (other session, same session): exit 3, nothing printed
//   f. PCR_Reset between checkpoints: exit 3; reset + replay of the digests on a
//      resettable PCR: not detected (the documented limit of checkpoint)
//   g. each response of a protected one-shot extend lost: no handle left
//   h. a forged response naming another client's handle: that handle is never flushed
//
// One swtpm for the suite (stopped by PID); a fresh interposer and TOFU
// state directory per test. Nothing depends on timing: the interposer's
// rules key on command order, and wait_idle() orders the test after the
// client's connection is gone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/attacker.h"
#include "support/direct_tpm.h"
#include "support/interposer.h"
#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/tpm_frames.h"
#include "tpmsec/bind_secret.h"
#include "tpmsec/commands.h"
#include "tpmsec/null_key.h"
#include "tpmsec/response_code.h"
#include "tpmsec/salt.h"
#include "tpmsec/salt_key.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tracing.h"

namespace tpmsec::testing {
namespace {

constexpr uint32_t kPcr = 16;
// TPM_RC_SESSION_HANDLES (Part 2 §6.6.3: RC_VER1 + 0x005).
constexpr uint32_t kRcSessionHandles = 0x105;
// TPM_RC_ATTRIBUTES (Part 2 §6.6.3: RC_FMT1 + 0x002).
constexpr uint32_t kRcAttributes = 0x082;

Bytes digest_of(std::string_view text) { return openssl_digest(alg::kSha256, as_bytes(text)); }

std::string hex_handles(const std::vector<uint32_t>& handles) {
  std::string s;
  for (uint32_t h : handles) s += fmt::format("{}0x{:08x}", s.empty() ? "" : " ", h);
  return s.empty() ? "none" : s;
}

// ---- Frames the rules send or answer with ----

Bytes extend_command(uint32_t pcr, ByteView digest) {
  DigestValues v;
  v.digests.push_back(TaggedHash{alg::kSha256, Bytes(digest.begin(), digest.end())});
  return password_command(cc::kPcrExtend, {pcr}, marshal_to_bytes(v).value());
}

Bytes reset_command(uint32_t pcr) { return password_command(cc::kPcrReset, {pcr}, {}); }

// The sha256 digests of a PCR_Extend command.
std::vector<Bytes> digests_in(const CommandFrame& extend) {
  std::vector<Bytes> out;
  auto values = unmarshal_exact<DigestValues>(extend.parameters, "PCR_Extend parameters");
  if (!values.ok()) return out;
  for (const TaggedHash& d : values->digests) {
    if (d.hash == alg::kSha256) out.push_back(d.digest);
  }
  return out;
}

// A success response the attacker cannot authenticate: password entries as
// they are, random bytes where an HMAC session's nonce and HMAC belong.
Bytes forged_success(const CommandFrame& command) {
  ResponseFrame r;
  for (const SessionEntry& e : command.sessions) {
    if (e.handle == rh::kPasswordSession) {
      r.sessions.push_back(password_response_entry());
      continue;
    }
    SessionEntry out;
    out.nonce = digest_of(fmt::format("forged nonce {}", e.handle));
    out.attributes = e.attributes;
    out.hmac = digest_of(fmt::format("forged hmac {}", e.handle));
    r.sessions.push_back(out);
  }
  return build_response(r);
}

// The CreatePrimary in `hierarchy` sent with its template passed through
// `rewrite`; with `restore_answer`, the answer is put back to what the client
// asked for (its template, the TPM's unique, the name recomputed), so that
// nothing but an authenticated read can tell. Counts the rewrites.
Rule rewrite_create_primary(uint32_t hierarchy, std::function<void(Public&)> rewrite, bool restore_answer,
                            size_t* rewritten) {
  return [=](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (c.code != cc::kCreatePrimary) return pass(c, tpm);
    auto f = parse_command(c.bytes);
    if (!f.ok() || f->handles.size() != 1 || f->handles[0] != hierarchy) return pass(c, tpm);
    cmd::CreatePrimary asked;
    Reader r(f->parameters);
    unmarshal(r, asked.in_sensitive);
    unmarshal(r, asked.in_public);
    unmarshal(r, asked.outside_info);
    unmarshal(r, asked.creation_pcr);
    if (!r.status().ok() || r.remaining() != 0) return pass(c, tpm);
    cmd::CreatePrimary sent = asked;
    rewrite(sent.in_public.public_area);
    Writer w;
    marshal_all(w, sent.params());
    f->parameters = *w.finish();
    ++*rewritten;
    auto rsp = tpm.transmit(build_command(*f));
    if (!rsp.ok()) return Reply::close();
    if (!restore_answer) return Reply::answer(std::move(*rsp));
    auto answer = parse_response(*rsp, c.code);
    if (!answer.ok() || answer->code != rc::kSuccess) return Reply::answer(std::move(*rsp));
    cmd::CreatePrimary::Response made;
    Reader rr(answer->parameters);
    unmarshal_all(rr, made.params());
    if (!rr.status().ok()) return Reply::answer(std::move(*rsp));
    Public shown = asked.in_public.public_area;
    shown.unique_x = made.out_public.public_area.unique_x;
    shown.unique_y = made.out_public.public_area.unique_y;
    made.out_public.public_area = shown;
    made.name.bytes = compute_name(shown).value();
    Writer rw;
    marshal_all(rw, made.params());
    answer->parameters = *rw.finish();
    return Reply::answer(build_response(*answer));
  };
}

// TPM2_ECDH_ZGen (Part 3 §14.5; tpmsec never sends it): the TPM's shared
// point for the key at `handle` and the ephemeral point of an ECC
// encrypted salt (TPM2B(Q_e.x) || TPM2B(Q_e.y), i.e. a TPMS_ECC_POINT).
struct ZGen {
  uint32_t rc = 0;
  Bytes z;  // the shared point's x coordinate: the Z of the salt's KDFe
};
ZGen ecdh_zgen(Transport& transport, uint32_t handle, ByteView encrypted_salt) {
  constexpr uint32_t kEcdhZGen = 0x154;
  Writer w;
  w.u16(static_cast<uint16_t>(encrypted_salt.size()));
  w.bytes(encrypted_salt);
  auto rsp = transport.transmit(password_command(kEcdhZGen, {handle}, *w.finish()));
  if (!rsp.ok()) {
    ADD_FAILURE() << "ECDH_ZGen: " << rsp.error().message();
    return {~0u, {}};
  }
  ZGen out;
  out.rc = response_code_of(*rsp);
  if (out.rc != rc::kSuccess) return out;
  Reader r(*rsp);
  (void)r.bytes(10, "header");
  (void)r.u32("parameterSize");
  Reader point = r.sized("outPoint");
  ByteView x = point.tpm2b("outPoint.x");
  out.z.assign(x.begin(), x.end());
  EXPECT_TRUE(point.ok() && r.ok()) << "an ECDH_ZGen answer that does not parse";
  return out;
}

// What whoever holds Z learns of a salt encrypted to `key` (salt.h):
// KDFe(nameAlg, Z, "SECRET", Q_e.x, Q_key.x, digest bits).
Bytes salt_from(ByteView z, ByteView encrypted_salt, const Public& key) {
  Reader r(encrypted_salt);
  ByteView ephemeral_x = r.tpm2b("Q_e.x");
  auto salt = crypto::kdfe(key.name_alg, z, "SECRET", ephemeral_x, key.unique_x, 256);
  if (!salt.ok()) return {};
  return Bytes(salt->view().begin(), salt->view().end());
}

// ---- Forged identity ----

struct Identity {
  std::string manufacturer;         // four characters, as TPM_PT_MANUFACTURER holds them
  std::vector<std::string> vendor;  // TPM_PT_VENDOR_STRING_1..4
  uint32_t firmware_1 = 0;          // TPM_PT_FIRMWARE_VERSION_1 (major << 16 | minor)
};

uint32_t chars4(std::string_view s) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | (i < s.size() ? static_cast<uint8_t>(s[i]) : 0);
  return v;
}

// Each manufacturer of the issue, with the vendor strings and firmware of a
// profile of that maker where one exists (data/profiles/*.json), so the
// shipped policy's rule for that TPM is the one an unauthenticated identity
// read would pick.
const std::vector<Identity>& forged_identities() {
  static const std::vector<Identity> ids{
      // The rule of data/policy/default.toml at 1525db5 each one matched:
      {"MCHP", {"", "", "", ""}, 0},                     // attpm20p: plain
      {"IFX ", {"SLB9", "670", "", ""}, 7u << 16 | 85},  // slb9670: checkpoint
      {"STM ", {"", "", "", ""}, 74u << 16 | 8},         // st33tphf2x: resident
      {"NTC ", {"rlsN", "PCT", "", ""}, 1u << 16 | 3},   // npct650: checkpoint
      {"ATML", {"", "", "", ""}, 0},                     // no profile: default (resident)
  };
  return ids;
}

// GetCapability(TPM_CAP_TPM_PROPERTIES) responses rewritten to `id`.
Result<Bytes> rewrite_identity(ByteView response, const Identity& id) {
  TPMSEC_ASSIGN_OR_RETURN(ResponseFrame f, parse_response(response, cc::kGetCapability));
  if (f.code != rc::kSuccess) return Bytes(response.begin(), response.end());
  Reader r(f.parameters);
  cmd::GetCapability::Response rsp;
  unmarshal_all(r, rsp.params());
  r.expect_end("GetCapability parameters");
  TPMSEC_RETURN_IF_ERROR(r.status());
  if (rsp.capability_data.capability != cap::kTpmProperties) return Bytes(response.begin(), response.end());
  for (TaggedProperty& p : rsp.capability_data.properties) {
    if (p.property == pt::kManufacturer) p.value = chars4(id.manufacturer);
    if (p.property >= pt::kVendorString1 && p.property <= pt::kVendorString4) {
      p.value = chars4(id.vendor[p.property - pt::kVendorString1]);
    }
    if (p.property == pt::kFirmwareVersion1 && id.firmware_1) p.value = id.firmware_1;
  }
  Writer w;
  marshal(w, rsp.more_data);
  marshal(w, rsp.capability_data);
  f.parameters = *w.finish();
  return build_response(f);
}

// The downgrade of issue 10: the identity read rewritten to `id`, and every
// PCR_Extend's digest swapped for the attacker's. A password-authorised
// extend then simply succeeds; an HMAC-protected one the TPM refuses, and
// the attacker claims success anyway (it cannot compute the response HMAC).
Rule forged_identity_rule(const Identity& id) {
  return [id](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (c.code == cc::kGetCapability) {
      Reply r = pass(c, tpm);
      if (!r.response) return r;
      auto forged = rewrite_identity(*r.response, id);
      if (!forged.ok()) return Reply::close();
      r.response = std::move(*forged);
      return r;
    }
    if (c.code != cc::kPcrExtend) return pass(c, tpm);
    auto f = parse_command(c.bytes);
    if (!f.ok()) return Reply::close();
    CommandFrame swapped = *f;
    DigestValues v;
    v.digests.push_back(TaggedHash{alg::kSha256, attacker_digest()});
    swapped.parameters = marshal_to_bytes(v).value();
    auto rsp = tpm.transmit(build_command(swapped));
    if (!rsp.ok()) return Reply::close();
    if (response_code_of(*rsp) == rc::kSuccess) return Reply::answer(std::move(*rsp));
    return Reply::answer(forged_success(*f));
  };
}

// ---- The fixture ----

class InterposerTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    swtpm_ = new SwtpmProcess();
    if (!swtpm_->start()) return;
    Direct d(swtpm_->spec());
    if (!d.ok()) return;
    genuine_name_ = new Bytes(genuine_null_name(d.tpm()));
  }
  static void TearDownTestSuite() {
    delete swtpm_;  // stops swtpm by PID
    swtpm_ = nullptr;
    delete genuine_name_;
    genuine_name_ = nullptr;
  }

 protected:
  void SetUp() override {
    if (!swtpm_->running()) GTEST_SKIP() << swtpm_->error();
    ASSERT_NE(genuine_name_, nullptr);
    ASSERT_FALSE(genuine_name_->empty()) << "the genuine null key could not be created";
    proxy_ = std::make_unique<Interposer>(swtpm_->port());
    ASSERT_TRUE(proxy_->start().ok());
    char tmpl[] = "/tmp/tpmsec-interposer-state-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    state_dir_ = tmpl;
  }

  void TearDown() override {
    if (proxy_) proxy_->stop();
    if (swtpm_->running()) {
      // A leak is each test's failure to report; here it is only cleared so
      // that the next test starts from an empty TPM.
      Direct d(swtpm_->spec());
      if (d.ok()) {
        for (uint32_t h : list_handles(d.tpm())) (void)d.tpm().run(cmd::FlushContext{h});
      }
    }
    if (!state_dir_.empty()) std::filesystem::remove_all(state_dir_);
  }

  // The CLI through the interposer; returns once the interposer saw the
  // client's connection close.
  CommandResult through_proxy(std::vector<std::string> args) {
    args.push_back("--tpm");
    args.push_back(proxy_->spec());
    CommandResult r = run_tpmsec(args, env());
    proxy_->wait_idle();
    return r;
  }
  std::vector<std::string> env() const {
    std::vector<std::string> e{"TPMSEC_STATE_DIR=" + state_dir_};
    e.insert(e.end(), extra_env_.begin(), extra_env_.end());
    return e;
  }
  // A policy whose only rule has `null_key = "recreate"`: every session's
  // null key comes from a CreatePrimary held to the pin, none from a kept context.
  void use_recreating_policy() {
    const std::string path = state_dir_ + "/recreate.toml";
    std::ofstream(path) << "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"recreate\"\nextend = \"resident\"\n"
                           "null_key = \"recreate\"\nreason = \"test: the null key is created afresh\"\n";
    extra_env_ = {"TPMSEC_POLICY=" + path};
  }

  // PCR 16 as hex, read straight from swtpm.
  std::string pcr() {
    Direct d(swtpm_->spec());
    if (!d.ok()) return "";
    auto rsp = d.tpm().run(cmd::PcrRead{PcrSelectionList{{PcrSelection::single(alg::kSha256, kPcr)}}});
    EXPECT_TRUE(rsp.ok()) << rsp.error().message();
    if (!rsp.ok() || rsp->pcr_values.digests.size() != 1) return "";
    return to_hex(rsp->pcr_values.digests[0]);
  }
  std::vector<uint32_t> handles() {
    Direct d(swtpm_->spec());
    return d.ok() ? list_handles(d.tpm()) : std::vector<uint32_t>{};
  }
  // Fails when anything is left loaded, then flushes it so that the next
  // step of the test starts from an empty TPM again.
  void expect_no_handles(const std::string& what) {
    Direct d(swtpm_->spec());
    if (!d.ok()) return;
    std::vector<uint32_t> left = list_handles(d.tpm());
    EXPECT_TRUE(left.empty()) << what << ": left loaded on the TPM: " << hex_handles(left);
    for (uint32_t h : left) (void)d.tpm().run(cmd::FlushContext{h});
  }
  std::string genuine_name_hex() const { return to_hex(*genuine_name_); }

  // A genuine first use with --tofu, through the interposer while it still
  // passes everything: the pin is kept under the TPM string the client uses
  // (a bus interposer does not change it), and the attack starts after.
  void establish_tofu_pin() {
    proxy_->set_rule(nullptr);
    auto pin = through_proxy({"pcr", "read", "16", "--protect", "audit", "--tofu"});
    ASSERT_EQ(pin.exit_code, 0) << "establishing the TOFU pin genuinely: " << describe(pin);
    expect_no_handles("establishing the TOFU pin");
  }

  // The null key's name as the TPM itself creates it (no interposer).
  static Bytes genuine_null_name(Tpm& tpm) {
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(rh::kNull);
    c.in_public.public_area = null_key_template(SaltKind::kEcc);
    auto rsp = tpm.run(c, {Auth::password()});
    if (!rsp.ok()) return {};
    (void)tpm.run(cmd::FlushContext{rsp->object_handle});
    return rsp->name.bytes;
  }

  static SwtpmProcess* swtpm_;
  static Bytes* genuine_name_;
  std::unique_ptr<Interposer> proxy_;
  std::string state_dir_;
  std::vector<std::string> extra_env_;
};

SwtpmProcess* InterposerTest::swtpm_ = nullptr;
Bytes* InterposerTest::genuine_name_ = nullptr;

// ---- The interposer itself ----

// The proxy is transparent when it passes: the CLI works through it as
// straight to swtpm, and every command went through the proxy.
TEST_F(InterposerTest, PassesTrafficUnchanged) {
  std::string before = pcr();
  auto r = through_proxy({"pcr", "extend", "16", to_hex(client_digest()), "--null-name", genuine_name_hex()});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(pcr(), extended_hex(before, client_digest()));
  EXPECT_GT(proxy_->commands(), 5u);
  EXPECT_EQ(proxy_->connections(), 1u);
  expect_no_handles("a clean extend");
}

// ---- a. Forged identity ----

// The identity read is rewritten to each manufacturer (with a profile's vendor
// strings and firmware, so the shipped policy's rule for that TPM would
// match), and every extend's digest is swapped. Whatever the identity, the
// decision never falls to a strategy without prevention: the extend is
// HMAC-protected, the TPM refuses the swapped one, and the attacker's claim
// of success fails verification.
TEST_F(InterposerTest, ForgedIdentityNeverLowersProtection) {
  ASSERT_NO_FATAL_FAILURE(establish_tofu_pin());
  for (const Identity& id : forged_identities()) {
    SCOPED_TRACE("manufacturer " + id.manufacturer);
    std::string before = pcr();
    proxy_->set_rule(forged_identity_rule(id));
    auto r = through_proxy({"pcr", "extend", "16", to_hex(client_digest()), "--tofu"});
    std::string after = pcr();
    EXPECT_NE(after, extended_hex(before, attacker_digest())) << "the attacker's digest is in the PCR; " << describe(r);
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_EQ(after, before);
    expect_no_handles("forged identity " + id.manufacturer);
  }
}

// ---- b. Null-key substitution ----

// The strategies that open salted sessions (checkpoint for its audited reads).
const std::vector<std::string>& salted_strategies() {
  static const std::vector<std::string> s{"", "per-command", "saved-context", "resident", "checkpoint"};
  return s;
}

std::vector<std::string> extend_args(const std::string& strategy, std::vector<std::string> anchor) {
  std::vector<std::string> args{"pcr", "extend", "16", to_hex(client_digest())};
  if (!strategy.empty()) args.insert(args.end(), {"--strategy", strategy});
  args.insert(args.end(), anchor.begin(), anchor.end());
  return args;
}

class NullKeySubstitution : public InterposerTest {
 protected:
  void SetUp() override {
    InterposerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto a = NullKeyAttacker::create(AttackerOptions{attacker_digest()});
    ASSERT_TRUE(a.ok()) << a.error().message();
    attacker_ = std::move(*a);
    proxy_->set_rule(attacker_->rule());
  }

  // Every salted strategy with `anchor`: the attacker's key is refused with
  // `exit_code` and nothing reaches the PCR.
  void expect_refused(const std::vector<std::string>& anchor, int exit_code) {
    for (const std::string& strategy : salted_strategies()) {
      SCOPED_TRACE(strategy.empty() ? "default policy" : "--strategy " + strategy);
      std::string before = pcr();
      auto r = through_proxy(extend_args(strategy, anchor));
      EXPECT_EQ(attacker_->error(), "");
      EXPECT_EQ(r.exit_code, exit_code) << describe(r);
      EXPECT_EQ(pcr(), before) << describe(r);
      expect_no_handles("null-key substitution");
    }
    // An audited read, and random bytes through an encrypted session (its
    // cipher check included): nothing the attacker's session vouches for is printed.
    for (std::vector<std::string> args :
         {std::vector<std::string>{"pcr", "read", "16", "--protect", "audit"}, std::vector<std::string>{"random", "16"},
          std::vector<std::string>{"random", "16", "--xor"}}) {
      SCOPED_TRACE(args[0]);
      auto r = through_proxy(concat_args(args, anchor));
      EXPECT_EQ(r.exit_code, exit_code) << describe(r);
      EXPECT_EQ(r.out, "") << "a value vouched for by the attacker's session was printed";
      expect_no_handles(args[0]);
    }
  }

  static std::vector<std::string> concat_args(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  std::unique_ptr<NullKeyAttacker> attacker_;
};

TEST_F(NullKeySubstitution, RefusedAgainstThePinnedName) {
  expect_refused({"--null-name", genuine_name_hex()}, kExitIntegrity);
  EXPECT_GT(attacker_->counters().keys_substituted, 0u);
  EXPECT_EQ(attacker_->counters().salts_recovered, 0u) << "a session was salted to the attacker's key";
}

TEST_F(NullKeySubstitution, RefusedAgainstAGenuineTofuPin) {
  ASSERT_NO_FATAL_FAILURE(establish_tofu_pin());
  proxy_->set_rule(attacker_->rule());
  expect_refused({"--tofu"}, kExitIntegrity);
  EXPECT_EQ(attacker_->counters().salts_recovered, 0u) << "a session was salted to the attacker's key";
}

// Where the policy has the null key created afresh for each session
// (null_key = "recreate": no kept context), each CreatePrimary is held to
// the pin as the first one is: the attacker's key is refused every time,
// against a given name and against this boot's TOFU pin, with or without a
// key kept by an earlier genuine run.
TEST_F(NullKeySubstitution, RefusedWhenTheKeyIsCreatedAfreshForEachSession) {
  use_recreating_policy();
  expect_refused({"--null-name", genuine_name_hex()}, kExitIntegrity);
  ASSERT_NO_FATAL_FAILURE(establish_tofu_pin());
  proxy_->set_rule(nullptr);
  auto genuine = through_proxy(extend_args("", {"--tofu"}));  // keeps nothing to load: a fresh key each time
  ASSERT_EQ(genuine.exit_code, 0) << describe(genuine);
  expect_no_handles("a genuine extend with the key created afresh");
  proxy_->set_rule(attacker_->rule());
  expect_refused({"--tofu"}, kExitIntegrity);
  EXPECT_GT(attacker_->counters().keys_substituted, 0u);
  EXPECT_EQ(attacker_->counters().salts_recovered, 0u) << "a session was salted to the attacker's key";
}

// Without --null-name, --ek-ca or --tofu a protected command over a bus
// refuses to start, and says what to give.
TEST_F(NullKeySubstitution, RefusedWithoutAnAnchor) {
  expect_refused({}, kExitUsage);
  EXPECT_EQ(attacker_->counters().salts_recovered, 0u) << "a session was salted to the attacker's key";
  auto r = through_proxy(extend_args("", {}));
  for (const char* option : {"--null-name", "--ek-ca", "--tofu"}) {
    EXPECT_NE(r.err.find(option), std::string::npos) << "the refusal does not name " << option << ": " << r.err;
  }
}

// The limit of trust on first use: a first use through the attacker pins
// the attacker's key and the attack wins that once; the next genuine use
// (the interposer passing everything) sees a different null key on the same
// boot: exit 3.
TEST_F(NullKeySubstitution, TofuFirstUseThroughTheAttackerIsCaughtOnTheNextGenuineUse) {
  std::string before = pcr();
  auto first = through_proxy(extend_args("", {"--tofu"}));
  EXPECT_EQ(first.exit_code, 0) << describe(first);
  EXPECT_EQ(pcr(), extended_hex(before, attacker_digest())) << "first use trusts whoever answers: " << describe(first);
  // Pinned, the attacker's key is trusted from then on: parameter
  // encryption and its cipher check included.
  size_t forged = attacker_->counters().responses_forged;
  auto random = through_proxy({"random", "16", "--tofu"});
  EXPECT_EQ(random.exit_code, 0) << describe(random);
  EXPECT_GT(attacker_->counters().responses_forged, forged + 1);
  EXPECT_EQ(attacker_->error(), "");
  proxy_->set_rule(nullptr);
  auto genuine = through_proxy({"pcr", "read", "16", "--protect", "audit", "--tofu"});
  EXPECT_EQ(genuine.exit_code, kExitIntegrity) << describe(genuine);
  EXPECT_EQ(genuine.out, "");
  expect_no_handles("TOFU first use");
}

// ---- c. Forged StartAuthSession ----

enum class SessionForgery { kNonceTpm, kHandle };

// StartAuthSession goes to the TPM; its response comes back with the
// nonceTPM changed (the client derives another session key than the TPM)
// or with another session's handle.
Rule forge_start_auth_session(SessionForgery what) {
  return [what](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    Reply r = pass(c, tpm);
    if (c.code != cc::kStartAuthSession || !r.response) return r;
    auto f = parse_response(*r.response, c.code);
    if (!f.ok() || f->code != rc::kSuccess) return r;
    if (what == SessionForgery::kHandle) {
      f->handles[0] += 1;
    } else if (f->parameters.size() > 2) {
      f->parameters.back() ^= 0x01;  // the last byte of nonceTPM
    }
    r.response = build_response(*f);
    return r;
  };
}

// The client's session then disagrees with the TPM's, and the TPM refuses
// the first command in it (TPM_RC_BAD_AUTH, TPM_RC_REFERENCE_S0). tpmsec
// knows every authValue it uses, so a session it has just started failing
// like that means its StartAuthSession was altered on the bus: an integrity
// failure, not a runtime error, and nothing of the session may be left.
TEST_F(InterposerTest, ForgedStartAuthSessionIsAnIntegrityFailure) {
  for (SessionForgery what : {SessionForgery::kNonceTpm, SessionForgery::kHandle}) {
    for (std::string strategy : {"", "per-command", "saved-context"}) {
      SCOPED_TRACE(fmt::format("{} forged, {}", what == SessionForgery::kHandle ? "handle" : "nonceTPM",
                               strategy.empty() ? "default policy" : strategy));
      std::string before = pcr();
      proxy_->set_rule(forge_start_auth_session(what));
      auto r = through_proxy(extend_args(strategy, {"--null-name", genuine_name_hex()}));
      EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
      EXPECT_EQ(pcr(), before);
      expect_no_handles("forged StartAuthSession");
    }
  }
}

// ---- d. Forged error responses ----

// The first PCR_Extend reaches the TPM and executes; the client is told it
// failed with `code`. Whatever the client does next, the digest lands once:
// exit 0 with it extended exactly once, or a failure with it extended at
// most once. Never twice.
TEST_F(InterposerTest, ForgedErrorAfterTheExtendNeverExtendsTwice) {
  for (uint32_t code : {rc::kRetry, rc::kFailure, kRcSessionHandles}) {
    for (std::string strategy : {"", "per-command", "saved-context", "resident", "checkpoint", "plain"}) {
      SCOPED_TRACE(fmt::format("forged {} after execution, {}", describe_rc(code),
                               strategy.empty() ? "default policy" : strategy));
      std::string before = pcr();
      std::string once = extended_hex(before, client_digest());
      bool forged = false;
      proxy_->set_rule([code, &forged](const ProxiedCommand& c, Upstream& tpm) -> Reply {
        Reply r = pass(c, tpm);
        if (c.code != cc::kPcrExtend || forged || !r.response) return r;
        forged = true;
        ResponseFrame error;
        error.code = code;
        return Reply::answer(build_response(error));
      });
      auto r = through_proxy(extend_args(strategy, {"--null-name", genuine_name_hex()}));
      std::string after = pcr();
      EXPECT_TRUE(forged);
      EXPECT_NE(after, extended_hex(once, client_digest())) << "extended twice; " << describe(r);
      if (r.exit_code == 0) {
        EXPECT_EQ(after, once) << "exit 0 without the extend exactly once";
      } else {
        EXPECT_TRUE(after == before || after == once) << "PCR " << after << "; " << describe(r);
      }
      expect_no_handles("forged error");
    }
  }
}

// ---- e. Replayed audit responses ----

// A PCR_Read response recorded from an earlier audited read, answered to a
// later one (the command still reaches the TPM). Its HMAC covers the
// nonceCaller of the command it answered, not this one's.
class AuditReplay {
 public:
  Rule record() {
    return [this](const ProxiedCommand& c, Upstream& tpm) {
      Reply r = pass(c, tpm);
      if (c.code == cc::kPcrRead && r.response && is_audited(c)) recorded_.push_back(*r.response);
      return r;
    };
  }
  // Replays the `which`-th recorded response to every audited PCR_Read from
  // the `from`-th on (counting this rule's audited reads from 0).
  Rule replay(size_t which, size_t from) {
    return [this, which, from](const ProxiedCommand& c, Upstream& tpm) {
      Reply r = pass(c, tpm);
      if (c.code != cc::kPcrRead || !r.response || !is_audited(c)) return r;
      if (reads_++ >= from && which < recorded_.size()) {
        r.response = recorded_[which];
        ++replayed_;
      }
      return r;
    };
  }
  size_t recorded() const { return recorded_.size(); }
  size_t replayed() const { return replayed_; }

 private:
  static bool is_audited(const ProxiedCommand& c) {
    auto f = parse_command(c.bytes);
    if (!f.ok()) return false;
    return std::any_of(f->sessions.begin(), f->sessions.end(),
                       [](const SessionEntry& e) { return (e.attributes & attr::kAudit) != 0; });
  }
  std::vector<Bytes> recorded_;
  size_t reads_ = 0;
  size_t replayed_ = 0;
};

TEST_F(InterposerTest, ReplayedAuditResponseIsAnIntegrityFailure) {
  const std::vector<std::string> anchor{"--null-name", genuine_name_hex()};
  AuditReplay replay;
  proxy_->set_rule(replay.record());
  auto first = through_proxy({"pcr", "read", "16", "--protect", "audit", "--null-name", genuine_name_hex()});
  ASSERT_EQ(first.exit_code, 0) << describe(first);
  ASSERT_EQ(replay.recorded(), 1u);

  // Into a later audited read: nothing printed.
  proxy_->set_rule(replay.replay(0, 0));
  auto read = through_proxy({"pcr", "read", "16", "--protect", "audit", "--null-name", genuine_name_hex()});
  EXPECT_EQ(read.exit_code, kExitIntegrity) << describe(read);
  EXPECT_EQ(read.out, "");
  expect_no_handles("replayed audit into pcr read");

  // Into the audited read an extend stream starts from (checkpoint reads
  // first even for one extend; a one-shot preventing extend reads nothing):
  // the extend never happens.
  std::string before = pcr();
  auto extend = through_proxy(extend_args("checkpoint", anchor));
  EXPECT_EQ(extend.exit_code, kExitIntegrity) << describe(extend);
  EXPECT_EQ(pcr(), before);
  EXPECT_EQ(replay.replayed(), 2u);
  expect_no_handles("replayed audit into pcr extend");
}

// Within one session: checkpoint keeps its audit session loaded between
// reads, so the same session's earlier response is replayed to its final
// checkpoint.
TEST_F(InterposerTest, ReplayedAuditResponseOfTheSameSessionIsAnIntegrityFailure) {
  AuditReplay replay;
  Rule record = replay.record();
  Rule replay_later = replay.replay(0, 0);
  proxy_->set_rule([&](const ProxiedCommand& c, Upstream& tpm) {
    return replay.recorded() == 0 ? record(c, tpm) : replay_later(c, tpm);
  });
  auto r = through_proxy(extend_args("checkpoint", {"--null-name", genuine_name_hex()}));
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  EXPECT_EQ(replay.replayed(), 1u);
  expect_no_handles("replayed audit within the session");
}

// ---- f. Reset between checkpoints ----

// An IMA log replayed into PCR 16 with --strategy checkpoint: plain extends,
// an audited read every 5. After the client's 7th extend the interposer
// resets PCR 16 itself (PCR_Reset with the empty platform authValue of a
// resettable PCR), and optionally re-extends every digest it saw since the
// client's own reset.
bool succeeds(Upstream& tpm, ByteView command) {
  auto r = tpm.transmit(command);
  return r.ok() && response_code_of(*r) == rc::kSuccess;
}

class PcrResetInjector {
 public:
  PcrResetInjector(size_t after_extends, bool replay) : after_(after_extends), replay_(replay) {}
  Reply operator()(const ProxiedCommand& c, Upstream& tpm) {
    if (c.code == cc::kPcrReset) seen_.clear();
    if (c.code == cc::kPcrExtend && extends_ == after_ && !injected_) {
      injected_ = true;
      if (!succeeds(tpm, reset_command(kPcr))) return Reply::close();
      if (replay_) {
        for (const Bytes& d : seen_) {
          if (!succeeds(tpm, extend_command(kPcr, d))) return Reply::close();
        }
      }
    }
    if (c.code == cc::kPcrExtend) {
      ++extends_;
      if (auto f = parse_command(c.bytes); f.ok()) {
        for (Bytes& d : digests_in(*f)) seen_.push_back(std::move(d));
      }
    }
    return pass(c, tpm);
  }
  bool injected() const { return injected_; }

 private:
  size_t after_;
  bool replay_;
  size_t extends_ = 0;
  bool injected_ = false;
  std::vector<Bytes> seen_;
};

class ResetBetweenCheckpoints : public InterposerTest {
 protected:
  void SetUp() override {
    InterposerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    for (int i = 0; i < 20; ++i) records_.push_back(sample_ima_record("ima-ng", i));
    log_ = state_dir_ + "/ascii_runtime_measurements";
    std::FILE* f = std::fopen(log_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string text = ima_ascii_log(records_);
    ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
    std::fclose(f);
  }
  CommandResult replay() {
    return through_proxy({"replay", "--ima", log_, "--pcr", "16", "--strategy", "checkpoint", "--checkpoint-every", "5",
                          "--null-name", genuine_name_hex()});
  }
  std::vector<ImaRecord> records_;
  std::string log_;
};

TEST_F(ResetBetweenCheckpoints, ResetWithoutReplayFailsTheNextCheckpoint) {
  PcrResetInjector inject(7, /*replay=*/false);
  proxy_->set_rule(std::ref(inject));
  auto r = replay();
  EXPECT_TRUE(inject.injected());
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  EXPECT_NE(r.err.find("checkpoint mismatch"), std::string::npos) << r.err;
  expect_no_handles("PCR reset between checkpoints");
}

// What a checkpoint on a resettable PCR does not catch: the interposer saw
// every digest in the clear, so after its reset it extends them again and
// the PCR holds exactly the value the client expects. Comparing values cannot
// tell; this is the documented limit of checkpoint on PCR 16/23
// (docs/threat-model.md), not a defence.
TEST_F(ResetBetweenCheckpoints, ResetAndReplayOnAResettablePcrIsNotDetected) {
  PcrResetInjector inject(7, /*replay=*/true);
  proxy_->set_rule(std::ref(inject));
  auto r = replay();
  EXPECT_TRUE(inject.injected());
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(pcr(), to_hex(ima_expected_pcr(records_, alg::kSha256, 10)));
  expect_no_handles("PCR reset and replay");
}

// ---- g. Lost responses ----

// Every command of a protected one-shot extend in turn reaches the TPM and
// executes, and its response is lost. The client fails (or recovers), the
// digest lands at most once, and nothing is left loaded on the TPM.
enum class Loss {
  kCutOff,     // a success header whose body never came: the frame is consistent, the content missing
  kTruncated,  // the first half of the TPM's response, its size field made to match
  kClosed,     // the connection closes after the TPM executed the command
};

std::string loss_name(Loss how) {
  switch (how) {
    case Loss::kCutOff:
      return "cut off after the header";
    case Loss::kTruncated:
      return "truncated to half";
    case Loss::kClosed:
      return "lost with the connection";
  }
  return "?";
}

Rule lose_response(size_t index, Loss how, uint32_t* lost_code) {
  return [=](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    Reply r = pass(c, tpm);
    if (c.in_connection != index || !r.response) return r;
    *lost_code = c.code;
    if (how == Loss::kClosed) return Reply::close();
    if (how == Loss::kCutOff) return Reply::answer(build_response(ResponseFrame{}));
    Bytes half(r.response->begin(), r.response->begin() + std::max<size_t>(10, r.response->size() / 2));
    store_be32(half.data() + 2, static_cast<uint32_t>(half.size()));
    return Reply::answer(std::move(half));
  };
}

class LostResponses : public InterposerTest {
 protected:
  // Loses each response of `pcr extend` in turn, the `how` way, for each
  // strategy that opens sessions of its own. Returns the runs made.
  size_t lose_each(Loss how) {
    size_t runs = 0;
    for (std::string strategy : {"per-command", "saved-context", "resident"}) {
      const std::vector<std::string> args = extend_args(strategy, {"--null-name", genuine_name_hex()});
      proxy_->set_rule(nullptr);
      size_t start = proxy_->commands();
      auto clean = through_proxy(args);
      EXPECT_EQ(clean.exit_code, 0) << describe(clean);
      const size_t commands = proxy_->commands() - start;
      for (size_t i = 0; i < commands; ++i) {
        uint32_t lost = 0;
        std::string before = pcr();
        proxy_->set_rule(lose_response(i, how, &lost));
        auto r = through_proxy(args);
        ++runs;
        std::string what =
            fmt::format("{}: response {} of {} ({}) {}", strategy, i, commands, command_name(lost), loss_name(how));
        std::string after = pcr();
        EXPECT_TRUE(after == before || after == extended_hex(before, client_digest())) << what << "; " << describe(r);
        if (r.exit_code == 0) {
          EXPECT_EQ(after, extended_hex(before, client_digest())) << what << "; " << describe(r);
        }
        expect_no_handles(what + "; " + describe(r));
      }
    }
    return runs;
  }
};

// The bus garbles the answer; the connection stays up, so the client can
// still find and flush what the TPM created.
TEST_F(LostResponses, GarbledResponsesLeakNoHandles) {
  size_t runs = 0;
  for (int round = 0; round < 2; ++round) {
    runs += lose_each(Loss::kCutOff);
    runs += lose_each(Loss::kTruncated);
  }
  // At least the four commands of a one-shot extend with a kept null key
  // (ContextLoad, StartAuthSession, FlushContext, PCR_Extend), per strategy,
  // loss kind and round.
  EXPECT_GE(runs, 2u * 2u * 3u * 4u);
}

// The connection drops with the response: from swtpm's side this is the
// client vanishing, and swtpm (unlike the kernel's /dev/tpmrm0) flushes
// nothing on close. Nothing may stay loaded all the same.
TEST_F(LostResponses, ResponsesLostWithTheConnectionLeakNoHandles) { lose_each(Loss::kClosed); }

// ---- h. Never a flushed foreign handle ----

// Another client's object and session stay loaded on swtpm (it keeps them
// across connections). Each forgery names one of them in a response where
// the client's own new handle belongs; the client must never flush it.
struct Foreign {
  uint32_t object = 0;
  uint32_t session = 0;
};

// Loads them over a connection of their own, closed again before the
// client under test connects (swtpm serves one client at a time). The
// session is of `session_type` (se::kHmac or se::kPolicy).
Foreign load_foreign(const std::string& spec, uint8_t session_type = se::kHmac) {
  Foreign f;
  Direct d(spec);
  EXPECT_TRUE(d.ok());
  if (!d.ok()) return f;
  Tpm& tpm = d.tpm();
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto obj = tpm.run(c, {Auth::password()});
  EXPECT_TRUE(obj.ok()) << obj.error().message();
  if (obj.ok()) f.object = obj->object_handle;
  cmd::StartAuthSession s;
  s.nonce_caller.bytes = digest_of("another client's nonce");
  s.symmetric = SymDef::aes128_cfb();
  s.session_type = session_type;
  auto session = tpm.run(s);
  EXPECT_TRUE(session.ok()) << session.error().message();
  if (session.ok()) f.session = session->session_handle;
  return f;
}

// The `nth` response to `code` (0 = every one) has its handle replaced by `handle`.
Rule rename_response_handle(uint32_t code, uint32_t handle) {
  return [=](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    Reply r = pass(c, tpm);
    if (c.code != code || !r.response) return r;
    auto f = parse_response(*r.response, c.code);
    if (!f.ok() || f->code != rc::kSuccess || f->handles.empty()) return r;
    f->handles[0] = handle;
    r.response = build_response(*f);
    return r;
  };
}

TEST_F(InterposerTest, ForgedHandlesNeverFlushAnotherClientsHandle) {
  struct Case {
    const char* what;
    uint32_t code;
    bool session;  // names the foreign session (else the foreign object)
    std::string strategy;
  };
  const std::vector<Case> cases{
      {"CreatePrimary", cc::kCreatePrimary, false, "per-command"},
      {"ContextLoad of the null key", cc::kContextLoad, false, "per-command"},
      {"StartAuthSession", cc::kStartAuthSession, true, "per-command"},
      {"StartAuthSession", cc::kStartAuthSession, true, "resident"},
      {"ContextLoad of the session", cc::kContextLoad, true, "saved-context"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(fmt::format("{} names the foreign {}, {}", k.what, k.session ? "session" : "object", k.strategy));
    Foreign foreign = load_foreign(swtpm_->spec());
    ASSERT_NE(foreign.object, 0u);
    ASSERT_NE(foreign.session, 0u);
    std::string before = pcr();
    uint32_t target = k.session ? foreign.session : foreign.object;
    // ContextLoad of the null key vs of a session: only rename loads of the kind named.
    Rule rename = rename_response_handle(k.code, target);
    proxy_->set_rule([&, rename](const ProxiedCommand& c, Upstream& tpm) -> Reply {
      if (k.code == cc::kContextLoad) {
        auto f = parse_command(c.bytes);
        if (f.ok() && f->code == k.code) {
          auto ctx = unmarshal_exact<Context>(f->parameters, "context");
          bool is_session = ctx.ok() && (ctx->saved_handle >> 24) == ht::kHmacSession;
          if (is_session != k.session) return pass(c, tpm);
        }
      }
      return rename(c, tpm);
    });
    auto r = through_proxy(extend_args(k.strategy, {"--null-name", genuine_name_hex()}));
    std::vector<uint32_t> left = handles();
    std::set<uint32_t> expected{foreign.object, foreign.session};
    EXPECT_EQ(std::set<uint32_t>(left.begin(), left.end()), expected)
        << "the foreign handles are " << hex_handles({foreign.object, foreign.session})
        << ", left loaded: " << hex_handles(left) << "; " << describe(r);
    std::string after = pcr();
    EXPECT_TRUE(after == before || (r.exit_code == 0 && after == extended_hex(before, client_digest()))) << describe(r);
    Direct d(swtpm_->spec());
    for (uint32_t h : left) (void)d.tpm().run(cmd::FlushContext{h});
  }
}

// The baseline listing is not authenticated: an interposer hides another
// client's handle from it, then makes a creating command's outcome unknown
// (the TPM ran it; its response is cut in half), so that the sweep that
// follows sees the hidden handle as a stray. A failed command can only have
// left a handle of the kind it creates, and the sweep flushes only that
// kind, and of sessions only the loaded ones of the type it asked for: the
// hidden object survives a lost StartAuthSession, the hidden session a lost
// null-key load, a hidden policy session a lost HMAC StartAuthSession, and
// the client's own stray is still flushed.
TEST_F(InterposerTest, AHandleHiddenFromTheBaselineIsNeverSwept) {
  struct Case {
    const char* what;
    bool hide_session;  // else the foreign object
    uint8_t session_type;
    bool lose_session;  // lose the StartAuthSession (else the null key's load)
  };
  for (const Case& k : {Case{"object hidden, StartAuthSession lost", false, se::kHmac, true},
                        Case{"session hidden, the null key's load lost", true, se::kHmac, false},
                        Case{"policy session hidden, HMAC StartAuthSession lost", true, se::kPolicy, true}}) {
    SCOPED_TRACE(k.what);
    Foreign foreign = load_foreign(swtpm_->spec(), k.session_type);
    ASSERT_NE(foreign.object, 0u);
    ASSERT_NE(foreign.session, 0u);
    const uint32_t hidden = k.hide_session ? foreign.session : foreign.object;
    auto lost = std::make_shared<bool>(false);
    auto hid = std::make_shared<int>(0);
    proxy_->set_rule([&k, hidden, lost, hid](const ProxiedCommand& c, Upstream& tpm) -> Reply {
      Reply r = pass(c, tpm);
      if (!r.response) return r;
      const bool creates_the_kind = !k.lose_session ? (c.code == cc::kCreatePrimary || c.code == cc::kContextLoad)
                                                    : c.code == cc::kStartAuthSession;
      if (creates_the_kind && !*lost) {
        *lost = true;
        Bytes half(r.response->begin(), r.response->begin() + std::max<size_t>(10, r.response->size() / 2));
        store_be32(half.data() + 2, static_cast<uint32_t>(half.size()));
        return Reply::answer(std::move(half));
      }
      if (c.code != cc::kGetCapability || *lost) return r;
      // Before the loss: every listing leaves the hidden handle out.
      auto f = parse_response(*r.response, c.code);
      if (!f.ok() || f->code != rc::kSuccess || f->parameters.size() < 9 ||
          load_be32(f->parameters.data() + 1) != cap::kHandles) {
        return r;
      }
      Bytes& p = f->parameters;
      for (size_t i = 9; i + 4 <= p.size(); i += 4) {
        if (load_be32(p.data() + i) != hidden) continue;
        p.erase(p.begin() + static_cast<std::ptrdiff_t>(i), p.begin() + static_cast<std::ptrdiff_t>(i) + 4);
        store_be32(p.data() + 5, load_be32(p.data() + 5) - 1);
        ++*hid;
        r.response = build_response(*f);
        break;
      }
      return r;
    });
    auto r = through_proxy(extend_args("per-command", {"--null-name", genuine_name_hex()}));
    EXPECT_TRUE(*lost) << describe(r);
    EXPECT_GE(*hid, 1) << "the baseline was not listed; " << describe(r);
    std::vector<uint32_t> left = handles();
    EXPECT_EQ(std::set<uint32_t>(left.begin(), left.end()), (std::set<uint32_t>{foreign.object, foreign.session}))
        << "the foreign handles are " << hex_handles({foreign.object, foreign.session})
        << ", left loaded: " << hex_handles(left) << "; " << describe(r);
    Direct d(swtpm_->spec());
    for (uint32_t h : left) (void)d.tpm().run(cmd::FlushContext{h});
  }
}

// The argument for what a sweep may still flush (docs/threat-model.md,
// "Handles"): FlushContext needs no authorization (Part 3 §28.4, "Auth
// Index: None"), so the interposer flushes another client's object and
// session itself. It injects one FlushContext per handle, with no session and
// no key, ahead of the client's first command, and the TPM obeys.
TEST_F(InterposerTest, AnInterposerFlushesAnotherClientsHandleItself) {
  Foreign foreign = load_foreign(swtpm_->spec());
  ASSERT_NE(foreign.object, 0u);
  ASSERT_NE(foreign.session, 0u);
  auto injected = std::make_shared<std::vector<uint32_t>>();
  proxy_->set_rule([&foreign, injected](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (injected->empty()) {
      for (uint32_t h : {foreign.object, foreign.session}) {
        Bytes flush = {0x80, 0x01, 0, 0, 0, 14, 0, 0, 0x01, 0x65, 0, 0, 0, 0};  // TPM_ST_NO_SESSIONS
        store_be32(flush.data() + 10, h);
        auto r = tpm.transmit(flush);
        if (r.ok() && r->size() == 10 && load_be32(r->data() + 6) == rc::kSuccess) injected->push_back(h);
      }
    }
    return pass(c, tpm);
  });
  auto r = through_proxy(extend_args("per-command", {"--null-name", genuine_name_hex()}));
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(*injected, (std::vector<uint32_t>{foreign.object, foreign.session}));
  std::vector<uint32_t> left = handles();
  EXPECT_TRUE(left.empty()) << "left loaded: " << hex_handles(left);
}

// A provisioned bind secret (tpmsec provision) in place of a salt key: the
// session key depends on an authValue the bus never carried in the clear.
class BindSecretTest : public InterposerTest {
 protected:
  void SetUp() override {
    InterposerTest::SetUp();
    if (HasFatalFailure()) return;
    proxy_->set_rule(nullptr);
    auto provisioned = through_proxy({"provision", "--null-name", genuine_name_hex()});
    ASSERT_EQ(provisioned.exit_code, 0) << describe(provisioned);
    auto genuine = through_proxy(extend_args("per-command", {}));
    ASSERT_EQ(genuine.exit_code, 0) << describe(genuine);
    expect_no_handles("provisioning");
  }
  void TearDown() override {
    if (proxy_) {
      proxy_->set_rule(nullptr);
      (void)through_proxy({"provision", "--remove"});
    }
    InterposerTest::TearDown();
  }
};

// The interposer keeps the extend from the TPM and answers it "success" with
// a response HMAC it had to guess: exit 3, the PCR unchanged.
TEST_F(BindSecretTest, AForgedAnswerIsAnIntegrityFailure) {
  std::string before = pcr();
  proxy_->set_rule([](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (c.code != cc::kPcrExtend) return pass(c, tpm);
    auto frame = parse_command(c.bytes);
    if (!frame.ok() || frame->sessions.empty()) return pass(c, tpm);
    ResponseFrame forged;
    forged.sessions.push_back(SessionEntry{0, Bytes(32, 0x5A), 0, Bytes(32, 0xA5)});
    return Reply::answer(build_response(forged));
  });
  auto r = through_proxy(extend_args("per-command", {}));
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  EXPECT_EQ(pcr(), before);
  expect_no_handles("forged answer to a bound extend");
}

// Someone with the owner hierarchy replaces the index with one of the same
// handle and a secret of their own (a substituted entity; a swapped TPM is
// the same to the client). The TPM then derives another session key: it
// refuses the client's command, and any answer made with the substitute's
// key fails the client's check. The PCR is never extended.
TEST_F(BindSecretTest, ASubstitutedIndexCannotAnswer) {
  {
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE(undefine_bind_index(d.tpm(), kDefaultBindIndex).ok());
    cmd::NvDefineSpace define;
    define.auth_handle = NamedHandle::of(rh::kOwner);
    define.auth.bytes = Bytes(32, 0x33);
    define.public_info.nv_public = bind_index_public(kDefaultBindIndex);
    auto defined = d.tpm().run(define, {Auth::password()});
    ASSERT_TRUE(defined.ok()) << defined.error().message();
  }
  std::string before = pcr();
  proxy_->set_rule(nullptr);
  auto r = through_proxy(extend_args("per-command", {}));
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_EQ(pcr(), before);
  expect_no_handles("extend bound to a substituted index");
}

// A persistent salt key pinned by `tpmsec provision --salt-key`: sessions are
// salted to the kept public area, so only the TPM that holds its private part
// can read the salt.
class SaltKeyTest : public InterposerTest {
 protected:
  void SetUp() override {
    InterposerTest::SetUp();
    if (HasFatalFailure()) return;
    proxy_->set_rule(nullptr);
    auto pinned = through_proxy({"provision", "--salt-key", "--create", "--null-name", genuine_name_hex()});
    ASSERT_EQ(pinned.exit_code, 0) << describe(pinned);
    auto genuine = through_proxy(extend_args("per-command", {}));
    ASSERT_EQ(genuine.exit_code, 0) << describe(genuine);
    expect_no_handles("pinning the salt key");
  }
  void TearDown() override {
    if (proxy_) {
      proxy_->set_rule(nullptr);
      (void)through_proxy({"provision", "--remove", "--salt-key"});
      Direct d(swtpm_->spec());  // a substitute left by a test goes too
      if (d.ok()) {
        (void)d.tpm().run(cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle::of(kDefaultSaltKeyHandle),
                                            kDefaultSaltKeyHandle},
                          {Auth::password()});
      }
    }
    InterposerTest::TearDown();
  }

  // A key of the attacker's in the TPM: the SRK template with other unique
  // bytes, so another key pair; persisted at `handle` when non-zero.
  static Result<cmd::CreatePrimary::Response> other_key(Tpm& tpm, uint32_t handle) {
    Public other = null_key_template(SaltKind::kEcc);
    other.unique_x = Bytes(32, 0x42);
    return plant(tpm, other, handle);
  }
  // A primary of `tmpl` in the owner hierarchy, made by the TPM; persisted
  // at `handle` when non-zero.
  static Result<cmd::CreatePrimary::Response> plant(Tpm& tpm, const Public& tmpl, uint32_t handle) {
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(rh::kOwner);
    c.in_public.public_area = tmpl;
    TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(c, {Auth::password()}));
    if (handle) {
      auto persisted = tpm.run(
          cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle{rsp.object_handle, rsp.name.bytes}, handle},
          {Auth::password()});
      (void)tpm.run(cmd::FlushContext{rsp.object_handle});
      TPMSEC_RETURN_IF_ERROR(status_of(persisted));
    } else {
      (void)tpm.run(cmd::FlushContext{rsp.object_handle});
    }
    return rsp;
  }
};

TEST_F(SaltKeyTest, AForgedAnswerIsAnIntegrityFailure) {
  std::string before = pcr();
  proxy_->set_rule([](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (c.code != cc::kPcrExtend) return pass(c, tpm);
    auto frame = parse_command(c.bytes);
    if (!frame.ok() || frame->sessions.empty()) return pass(c, tpm);
    return Reply::answer(forged_success(*frame));
  });
  for (const std::string& strategy : salted_strategies()) {
    SCOPED_TRACE(strategy);
    auto r = through_proxy(extend_args(strategy, {}));
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_EQ(pcr(), before);
  }
  expect_no_handles("forged answer to an extend salted to the pinned key");
}

// The key at the pinned handle is evicted and replaced by another (someone
// with the owner hierarchy; a swapped TPM is the same to the client). The
// salt was encrypted to the pinned key: the TPM derives another session key,
// refuses the command, and nothing is extended.
TEST_F(SaltKeyTest, ASubstitutedKeyCannotAnswer) {
  {
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    auto evicted = d.tpm().run(
        cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle::of(kDefaultSaltKeyHandle), kDefaultSaltKeyHandle},
        {Auth::password()});
    ASSERT_TRUE(evicted.ok()) << evicted.error().message();
    auto other = other_key(d.tpm(), kDefaultSaltKeyHandle);
    ASSERT_TRUE(other.ok()) << other.error().message();
  }
  std::string before = pcr();
  proxy_->set_rule(nullptr);
  for (const std::string& strategy : salted_strategies()) {
    SCOPED_TRACE(strategy);
    auto r = through_proxy(extend_args(strategy, {}));
    EXPECT_NE(r.exit_code, 0) << describe(r);
    EXPECT_EQ(pcr(), before);
  }
  expect_no_handles("extend salted to a substituted key");
}

// While a key is pinned, the interposer answers every ReadPublic with a key
// of its own (name and all): the unauthenticated read it may fool, the
// audited one it cannot. Exit 3 and nothing pinned.
TEST_F(SaltKeyTest, AForgedPublicAreaIsNeverPinned) {
  auto removed = through_proxy({"provision", "--remove", "--salt-key"});
  ASSERT_EQ(removed.exit_code, 0) << describe(removed);
  cmd::ReadPublic::Response forged;
  {
    // swtpm serves one client at a time: this one goes before the CLI's.
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    auto mine = other_key(d.tpm(), 0);
    ASSERT_TRUE(mine.ok()) << mine.error().message();
    forged = {mine->out_public, mine->name, mine->name};
    // A genuine key at the handle, made by the TPM: only the answers lie.
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(rh::kOwner);
    c.in_public.public_area = null_key_template(SaltKind::kEcc);
    auto made = d.tpm().run(c, {Auth::password()});
    ASSERT_TRUE(made.ok()) << made.error().message();
    auto persisted =
        d.tpm().run(cmd::EvictControl{NamedHandle::of(rh::kOwner), NamedHandle{made->object_handle, made->name.bytes},
                                      kDefaultSaltKeyHandle},
                    {Auth::password()});
    (void)d.tpm().run(cmd::FlushContext{made->object_handle});
    ASSERT_TRUE(persisted.ok()) << persisted.error().message();
  }

  proxy_->set_rule([forged](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (c.code != cc::kReadPublic) return pass(c, tpm);
    Reply r = pass(c, tpm);
    if (!r.response) return r;
    auto f = parse_response(*r.response, c.code);
    if (!f.ok() || f->code != rc::kSuccess) return r;
    cmd::ReadPublic::Response copy = forged;
    Writer w;
    marshal_all(w, copy.params());
    f->parameters = *w.finish();
    r.response = build_response(*f);
    return r;
  });
  auto r = through_proxy({"provision", "--salt-key", "--null-name", genuine_name_hex()});
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  proxy_->set_rule(nullptr);
  auto info = through_proxy({"info"});
  EXPECT_NE(info.out.find("none pinned"), std::string::npos) << info.out;
  expect_no_handles("a forged ReadPublic");
}

// An unrestricted decryption key, as a local TPM user can make one: by the
// TPM (fixedTPM, fixedParent, sensitiveDataOrigin, all the checks tpmsec
// made before issue 21), with no symmetric definition (an unrestricted key
// has none).
Public unrestricted_template() {
  Public p = null_key_template(SaltKind::kEcc);
  p.attributes &= ~object_attr::kRestricted;
  p.symmetric = SymDef{};
  return p;
}

// A local TPM user plants an unrestricted decryption key at 0x81000001
// before the operator pins "the SRK". Whoever may use such a key has the TPM
// compute any session's salt from its encrypted salt (ECDH_ZGen, shown here
// on the real TPM), so a session salted to it is readable and forgeable; the
// SRK-template key the fixture made refuses the same command. Pinning the
// planted key is refused (exit 3, saying why), nothing is pinned, the extend
// that follows is salted to nothing of the attacker's (refused for want of
// an anchor: exit 2, PCR unchanged), and the key stays where it was, since
// tpmsec did not make it.
TEST_F(SaltKeyTest, APlantedUnrestrictedKeyIsNeverPinned) {
  {
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    auto srk = d.tpm().run(cmd::ReadPublic{NamedHandle::of(kDefaultSaltKeyHandle)});
    ASSERT_TRUE(srk.ok()) << srk.error().message();
    auto salted = make_salt_ecc(srk->out_public.public_area, {});
    ASSERT_TRUE(salted.ok()) << salted.error().message();
    ZGen refused = ecdh_zgen(d.transport(), kDefaultSaltKeyHandle, salted->encrypted_salt);
    EXPECT_EQ(rc_base(refused.rc), kRcAttributes) << fmt::format("0x{:03x}", refused.rc);
  }
  auto removed = through_proxy({"provision", "--remove", "--salt-key"});
  ASSERT_EQ(removed.exit_code, 0) << describe(removed);
  {
    Direct d(swtpm_->spec());
    ASSERT_TRUE(d.ok());
    auto planted = plant(d.tpm(), unrestricted_template(), kDefaultSaltKeyHandle);
    ASSERT_TRUE(planted.ok()) << planted.error().message();
    const Public& key = planted->out_public.public_area;
    // The attack this closes: a salt made for the planted key, as a session's
    // would be, is recovered through the TPM by whoever may use the key.
    auto salted = make_salt_ecc(key, {});
    ASSERT_TRUE(salted.ok()) << salted.error().message();
    ZGen z = ecdh_zgen(d.transport(), kDefaultSaltKeyHandle, salted->encrypted_salt);
    ASSERT_EQ(z.rc, rc::kSuccess) << fmt::format("0x{:03x}", z.rc);
    EXPECT_EQ(to_hex(salt_from(z.z, salted->encrypted_salt, key)), to_hex(salted->salt.view()));
  }
  std::string before = pcr();
  auto r = through_proxy({"provision", "--salt-key", "--null-name", genuine_name_hex()});
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  EXPECT_NE(r.err.find("0x81000001 cannot be the salt key: the key is not a restricted decryption key"),
            std::string::npos)
      << r.err;
  auto info = through_proxy({"info"});
  EXPECT_NE(info.out.find("none pinned"), std::string::npos) << info.out;
  auto extend = through_proxy(extend_args("per-command", {}));
  EXPECT_EQ(extend.exit_code, kExitUsage) << describe(extend);
  EXPECT_EQ(pcr(), before);
  expect_no_handles("pinning a planted unrestricted key");
  Direct d(swtpm_->spec());
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d.tpm().run(cmd::ReadPublic{NamedHandle::of(kDefaultSaltKeyHandle)}).ok())
      << "tpmsec evicted a key it did not make";
}

// An interposer rewrites the template of the CreatePrimary that `provision
// --salt-key --create` sends, and puts the answer back to the template asked
// for (name recomputed), so the unauthenticated answer shows nothing. The TPM
// made, and tpmsec persisted, a key it did not ask for: the audited
// ReadPublic shows it. Refused (exit 3, naming what differs), nothing pinned,
// the key made evicted again, nothing loaded, the PCR unchanged.
TEST_F(SaltKeyTest, ARewrittenCreateTemplateIsNeverPinned) {
  auto removed = through_proxy({"provision", "--remove", "--salt-key"});
  ASSERT_EQ(removed.exit_code, 0) << describe(removed);
  struct Variant {
    const char* what;
    std::function<void(Public&)> rewrite;
    const char* said;
  };
  const std::vector<Variant> variants{
      {"restricted cleared", [](Public& p) { p = unrestricted_template(); }, "not a restricted decryption key"},
      {"AES-256 in place of AES-128", [](Public& p) { p.symmetric.key_bits = 256; }, "not AES-128 CFB"},
      {"an authPolicy added", [](Public& p) { p.auth_policy = digest_of("the attacker's policy"); },
       "differs from the template sent in: authPolicy"},
      {"noDA cleared", [](Public& p) { p.attributes &= ~object_attr::kNoDa; },
       "differs from the template sent in: objectAttributes"},
  };
  const std::string before = pcr();
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.what);
    size_t rewritten = 0;
    proxy_->set_rule(rewrite_create_primary(rh::kOwner, v.rewrite, /*restore_answer=*/true, &rewritten));
    auto r = through_proxy({"provision", "--salt-key", "--create", "--null-name", genuine_name_hex()});
    EXPECT_EQ(rewritten, 1u);
    EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
    EXPECT_NE(r.err.find(v.said), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the key made was evicted again"), std::string::npos) << r.err;
    proxy_->set_rule(nullptr);
    auto info = through_proxy({"info"});
    EXPECT_NE(info.out.find("none pinned"), std::string::npos) << info.out;
    {
      Direct d(swtpm_->spec());
      ASSERT_TRUE(d.ok());
      auto left = d.tpm().run(cmd::ReadPublic{NamedHandle::of(kDefaultSaltKeyHandle)});
      ASSERT_FALSE(left.ok()) << "a key made from a rewritten template stayed at 0x81000001";
      EXPECT_EQ(rc_base(left.error().tpm_rc()), rc::kHandle) << left.error().message();
    }
    expect_no_handles("a rewritten salt key template");
    EXPECT_EQ(pcr(), before);
  }
  // Unrewritten, the same command makes and pins the key (the fixture's TearDown removes it).
  auto made = through_proxy({"provision", "--salt-key", "--create", "--null-name", genuine_name_hex()});
  EXPECT_EQ(made.exit_code, 0) << describe(made);
}

// The null key at a first use (--tofu, nothing pinned yet): an interposer
// rewrites its template (restricted cleared, as for the salt key above), so
// the TPM makes an unrestricted key. Its public area is not the template:
// refused (exit 3), the PCR unchanged, nothing pinned, so that a clean first
// use afterwards pins the genuine key and extends.
TEST_F(InterposerTest, AFirstUseRefusesANullKeyMadeFromARewrittenTemplate) {
  size_t rewritten = 0;
  proxy_->set_rule(rewrite_create_primary(
      rh::kNull, [](Public& p) { p = unrestricted_template(); },
      /*restore_answer=*/false, &rewritten));
  std::string before = pcr();
  auto r = through_proxy(extend_args("per-command", {"--tofu"}));
  EXPECT_GT(rewritten, 0u);
  EXPECT_EQ(r.exit_code, kExitIntegrity) << describe(r);
  EXPECT_NE(r.err.find("does not match the template"), std::string::npos) << r.err;
  EXPECT_EQ(pcr(), before);
  expect_no_handles("a rewritten null key template");
  proxy_->set_rule(nullptr);
  auto clean = through_proxy(extend_args("per-command", {"--tofu"}));
  EXPECT_EQ(clean.exit_code, 0) << describe(clean);
  auto pinned = through_proxy(extend_args("per-command", {"--null-name", genuine_name_hex()}));
  EXPECT_EQ(pinned.exit_code, 0) << describe(pinned);
}

// What `provision` keeps outlives the boot: the first use of one boot (an
// interposer's included) may not decide it. --tofu is a usage error (exit 2,
// one line naming the anchors provision takes) before any TPM command, and
// nothing is kept or defined.
TEST_F(InterposerTest, ProvisionRefusesTofu) {
  using Args = std::vector<std::string>;
  for (const Args& args : {Args{"provision", "--tofu"}, Args{"provision", "--salt-key", "--tofu"},
                           Args{"provision", "--salt-key", "--create", "--tofu"}}) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(args, " ")));
    auto r = through_proxy(args);
    EXPECT_EQ(r.exit_code, kExitUsage) << describe(r);
    for (const char* anchor : {"--null-name", "--ek-ca", "the kernel's pin"}) {
      EXPECT_NE(r.err.find(anchor), std::string::npos) << r.err;
    }
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_EQ(proxy_->connections(), 0u);
  EXPECT_TRUE(std::filesystem::is_empty(state_dir_));
  Direct d(swtpm_->spec());
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d.tpm().run(cmd::NvReadPublic{NamedHandle::of(kDefaultBindIndex)}).ok());
  EXPECT_FALSE(d.tpm().run(cmd::ReadPublic{NamedHandle::of(kDefaultSaltKeyHandle)}).ok());
}

// ---- i. --read-back ----

// `pcr extend --read-back` reads the PCR through an audit session and
// compares it with the value read (audited) before the extend, extended by
// the digest: what it prints is what the TPM holds, and the value it
// should. The rule acts on the last PCR_Read of a run (the read-back),
// counted in a genuine run first.
class ReadBack : public InterposerTest {
 protected:
  const std::vector<std::string> kStrategies{"", "per-command", "resident", "plain", "checkpoint"};
  std::vector<std::string> args(const std::string& strategy) {
    auto a = extend_args(strategy, {"--null-name", genuine_name_hex()});
    a.push_back("--read-back");
    return a;
  }
  // PCR_Reads in a genuine run of `strategy` (which must succeed).
  size_t reads_in(const std::string& strategy) {
    auto reads = std::make_shared<size_t>(0);
    proxy_->set_rule([reads](const ProxiedCommand& c, Upstream& tpm) {
      if (c.code == cc::kPcrRead) ++*reads;
      return pass(c, tpm);
    });
    auto r = through_proxy(args(strategy));
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    proxy_->set_rule(nullptr);
    return *reads;
  }
  // `act` runs on the last PCR_Read of a run that has `reads` of them.
  void on_read_back(size_t reads, std::function<Reply(const ProxiedCommand&, Upstream&)> act) {
    auto seen = std::make_shared<size_t>(0);
    proxy_->set_rule([=](const ProxiedCommand& c, Upstream& tpm) {
      if (c.code == cc::kPcrRead && ++*seen == reads) return act(c, tpm);
      return pass(c, tpm);
    });
  }
};

TEST_F(ReadBack, PrintsTheVerifiedValue) {
  for (const std::string& strategy : kStrategies) {
    SCOPED_TRACE(strategy.empty() ? "default policy" : strategy);
    std::string before = pcr();
    auto r = through_proxy(args(strategy));
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(pcr(), extended_hex(before, client_digest()));
    EXPECT_EQ(r.out, pcr() + "\n") << describe(r);
    expect_no_handles("a read-back");
  }
}

// The read-back's response rewritten on the bus: its audit HMAC fails.
TEST_F(ReadBack, ARewrittenReadBackIsAnIntegrityFailure) {
  for (const std::string& strategy : kStrategies) {
    SCOPED_TRACE(strategy.empty() ? "default policy" : strategy);
    const size_t reads = reads_in(strategy);
    ASSERT_GE(reads, 2u) << "the read-back and the read before the extend";
    std::string before = pcr();
    const std::string forged_value = to_hex(digest_of("the value the interposer wants shown"));
    auto rewritten = std::make_shared<bool>(false);
    on_read_back(reads, [=](const ProxiedCommand& c, Upstream& tpm) {
      Reply reply = pass(c, tpm);
      if (!reply.response) return reply;
      auto f = parse_response(*reply.response, c.code);
      if (!f.ok() || f->code != rc::kSuccess || f->parameters.size() < 32) return reply;
      Bytes value = *from_hex(forged_value);
      std::copy(value.begin(), value.end(), f->parameters.end() - 32);
      reply.response = build_response(*f);
      *rewritten = true;
      return reply;
    });
    auto r = through_proxy(args(strategy));
    EXPECT_TRUE(*rewritten);
    EXPECT_EQ(r.exit_code, 3) << describe(r);
    EXPECT_EQ(r.out.find(forged_value), std::string::npos) << describe(r);
    EXPECT_EQ(pcr(), extended_hex(before, client_digest()));
    expect_no_handles("a rewritten read-back");
  }
}

// Another client extends the PCR just before the read-back: the TPM's value
// is genuinely not the one the extend made, and the read-back says so.
TEST_F(ReadBack, AnExtendInBetweenIsAMismatch) {
  const Bytes foreign = digest_of("another client's extend");
  for (const std::string& strategy : kStrategies) {
    SCOPED_TRACE(strategy.empty() ? "default policy" : strategy);
    const size_t reads = reads_in(strategy);
    std::string before = pcr();
    on_read_back(reads, [=](const ProxiedCommand& c, Upstream& tpm) {
      auto injected = tpm.transmit(extend_command(kPcr, foreign));
      if (!injected.ok() || response_code_of(*injected) != rc::kSuccess) return Reply::close();
      return pass(c, tpm);
    });
    auto r = through_proxy(args(strategy));
    const std::string expected = extended_hex(before, client_digest());
    const std::string actual = extended_hex(expected, foreign);
    EXPECT_EQ(pcr(), actual);
    EXPECT_EQ(r.exit_code, 3) << describe(r);
    EXPECT_NE(r.err.find(fmt::format("PCR 16 reads back {}, not the {}", actual, expected)), std::string::npos)
        << describe(r);
    EXPECT_TRUE(r.out.empty()) << describe(r);
    expect_no_handles("a read-back after a foreign extend");
  }
}

}  // namespace
}  // namespace tpmsec::testing
