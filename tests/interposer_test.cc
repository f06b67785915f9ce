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
// One swtpm for the suite (stopped by PID); a fresh interposer and TOFU
// state directory per test. Nothing depends on timing: the interposer's
// rules key on command order, and wait_idle() orders the test after the
// client's connection is gone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/attacker.h"
#include "support/interposer.h"
#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/tpm_frames.h"
#include "tpmsec/commands.h"
#include "tpmsec/null_key.h"
#include "tpmsec/response_code.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"

namespace tpmsec::testing {
namespace {

constexpr uint32_t kPcr = 16;
constexpr int kExitUsage = 2;
constexpr int kExitIntegrity = 3;
// TPM_RC_SESSION_HANDLES (Part 2 §6.6.3: RC_VER1 + 0x005).
constexpr uint32_t kRcSessionHandles = 0x105;

Bytes digest_of(std::string_view text) { return openssl_digest(alg::kSha256, as_bytes(text)); }
Bytes extended(ByteView value, ByteView digest) { return openssl_extend(alg::kSha256, value, digest); }

// The client's measurement and the one the attacker wants in the PCR instead.
const Bytes& client_digest() {
  static const Bytes d = digest_of("tpmsec interposer test: the client's measurement");
  return d;
}
const Bytes& attacker_digest() {
  static const Bytes d = digest_of("tpmsec interposer test: the attacker's measurement");
  return d;
}

// A connection of the test's own to swtpm, bypassing the interposer. swtpm
// serves one connection at a time: open it only while no client runs.
class Direct {
 public:
  explicit Direct(const std::string& spec) {
    auto t = open_transport(spec);
    if (!t.ok()) {
      ADD_FAILURE() << "direct connection to swtpm: " << t.error().message();
      return;
    }
    transport_ = std::move(*t);
    tpm_ = std::make_unique<Tpm>(*transport_);
  }
  bool ok() const { return tpm_ != nullptr; }
  Tpm& tpm() { return *tpm_; }

 private:
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Tpm> tpm_;
};

// Loaded transient objects, loaded sessions and saved (active) sessions.
std::vector<uint32_t> list_handles(Tpm& tpm) {
  std::vector<uint32_t> out;
  for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstPolicySession}) {
    auto rsp = tpm.run(cmd::GetCapability{cap::kHandles, first, 64});
    EXPECT_TRUE(rsp.ok()) << rsp.error().message();
    if (!rsp.ok()) continue;
    for (uint32_t h : rsp->capability_data.handles) {
      if ((h >> 24) == (first >> 24)) out.push_back(h);
    }
  }
  return out;
}

std::string hex_handles(const std::vector<uint32_t>& handles) {
  std::string s;
  for (uint32_t h : handles) s += fmt::format("{}0x{:08x}", s.empty() ? "" : " ", h);
  return s.empty() ? "none" : s;
}

// ---- Frames the rules send or answer with ----

Bytes password_command(uint32_t code, std::vector<uint32_t> handles, Bytes parameters) {
  CommandFrame f;
  f.code = code;
  f.handles = std::move(handles);
  SessionEntry pw;
  pw.handle = rh::kPasswordSession;
  pw.attributes = attr::kContinueSession;
  f.sessions.push_back(pw);
  f.parameters = std::move(parameters);
  return build_command(f);
}

Bytes extend_command(uint32_t pcr, ByteView digest) {
  DigestValues v;
  v.digests.push_back(TaggedHash{alg::kSha256, Bytes(digest.begin(), digest.end())});
  return password_command(cmd::PcrExtend::kInfo.code, {pcr}, marshal_to_bytes(v));
}

Bytes reset_command(uint32_t pcr) { return password_command(cmd::PcrReset::kInfo.code, {pcr}, {}); }

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

// ---- Forged identity ----

struct Identity {
  std::string manufacturer;          // four characters, as TPM_PT_MANUFACTURER holds them
  std::vector<std::string> vendor;   // TPM_PT_VENDOR_STRING_1..4
  uint32_t firmware_1 = 0;           // TPM_PT_FIRMWARE_VERSION_1 (major << 16 | minor)
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
      {"MCHP", {"", "", "", ""}, 0},                  // attpm20p: the default policy says plain
      {"IFX ", {"SLB9", "670", "", ""}, 7u << 16 | 85},  // slb9670: checkpoint
      {"STM ", {"", "", "", ""}, 74u << 16 | 8},     // st33tphf2x: resident
      {"NTC ", {"rlsN", "PCT", "", ""}, 1u << 16 | 3},   // npct650: checkpoint
      {"ATML", {"", "", "", ""}, 0},                  // no profile: the default rule
  };
  return ids;
}

// GetCapability(TPM_CAP_TPM_PROPERTIES) responses rewritten to `id`.
Result<Bytes> rewrite_identity(ByteView response, const Identity& id) {
  TPMSEC_ASSIGN_OR_RETURN(ResponseFrame f, parse_response(response, cmd::GetCapability::kInfo.code));
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
  f.parameters = w.take();
  return build_response(f);
}

// The downgrade of issue 10: the identity read rewritten to `id`, and every
// PCR_Extend's digest swapped for the attacker's. A password-authorised
// extend then simply succeeds; an HMAC-protected one the TPM refuses, and
// the attacker claims success anyway (it cannot compute the response HMAC).
Rule forged_identity_rule(const Identity& id) {
  return [id](const ProxiedCommand& c, Upstream& tpm) -> Reply {
    if (c.code == cmd::GetCapability::kInfo.code) {
      Reply r = pass(c, tpm);
      if (!r.response) return r;
      auto forged = rewrite_identity(*r.response, id);
      if (!forged.ok()) return Reply::close();
      r.response = std::move(*forged);
      return r;
    }
    if (c.code != cmd::PcrExtend::kInfo.code) return pass(c, tpm);
    auto f = parse_command(c.bytes);
    if (!f.ok()) return Reply::close();
    CommandFrame swapped = *f;
    DigestValues v;
    v.digests.push_back(TaggedHash{alg::kSha256, attacker_digest()});
    swapped.parameters = marshal_to_bytes(v);
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
  // The CLI straight to swtpm.
  CommandResult direct(std::vector<std::string> args) {
    args.push_back("--tpm");
    args.push_back(swtpm_->tcti());
    return run_tpmsec(args, env());
  }
  std::vector<std::string> env() const { return {"TPMSEC_STATE_DIR=" + state_dir_}; }

  Bytes pcr() {
    Direct d(swtpm_->spec());
    if (!d.ok()) return {};
    auto rsp = d.tpm().run(cmd::PcrRead{PcrSelectionList{{PcrSelection::single(alg::kSha256, kPcr)}}});
    EXPECT_TRUE(rsp.ok()) << rsp.error().message();
    if (!rsp.ok() || rsp->pcr_values.digests.size() != 1) return {};
    return rsp->pcr_values.digests[0];
  }
  std::vector<uint32_t> handles() {
    Direct d(swtpm_->spec());
    return d.ok() ? list_handles(d.tpm()) : std::vector<uint32_t>{};
  }
  void expect_no_handles(const std::string& what) {
    std::vector<uint32_t> left = handles();
    EXPECT_TRUE(left.empty()) << what << ": left loaded on the TPM: " << hex_handles(left);
  }
  std::string genuine_name_hex() const { return to_hex(*genuine_name_); }

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
};

SwtpmProcess* InterposerTest::swtpm_ = nullptr;
Bytes* InterposerTest::genuine_name_ = nullptr;

std::string describe(const CommandResult& r) {
  return fmt::format("exit {}\nstdout: {}\nstderr: {}", r.exit_code, r.out, r.err);
}

// ---- The interposer itself ----

// The proxy is transparent when it passes: the CLI works through it as
// straight to swtpm, and every command went through the proxy.
TEST_F(InterposerTest, PassesTrafficUnchanged) {
  Bytes before = pcr();
  auto r = through_proxy({"pcr", "extend", "16", to_hex(client_digest()), "--null-name", genuine_name_hex()});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(pcr(), extended(before, client_digest()));
  EXPECT_GT(proxy_->commands(), 5u);
  EXPECT_EQ(proxy_->connections(), 1u);
  expect_no_handles("a clean extend");
}

// ---- Proof on main (temporary: these assert today's insecure outcome) ----

TEST_F(InterposerTest, ProofNullKeyAttackWinsWithoutAnchor) {
  auto attacker = NullKeyAttacker::create(AttackerOptions{attacker_digest()});
  ASSERT_TRUE(attacker.ok()) << attacker.error().message();
  proxy_->set_rule((*attacker)->rule());
  for (std::string strategy : {"", "per-command", "saved-context", "resident"}) {
    SCOPED_TRACE(strategy.empty() ? "default policy" : strategy);
    Bytes before = pcr();
    std::vector<std::string> args{"pcr", "extend", "16", to_hex(client_digest())};
    if (!strategy.empty()) args.insert(args.end(), {"--strategy", strategy});
    auto r = through_proxy(args);
    EXPECT_EQ((*attacker)->error(), "");
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    EXPECT_EQ(pcr(), extended(before, attacker_digest()));
    expect_no_handles("after the attack");
  }
  auto c = (*attacker)->counters();
  fmt::print("attacker: {} keys substituted, {} salts recovered, {} responses forged, {} extends substituted\n",
             c.keys_substituted, c.salts_recovered, c.responses_forged, c.extends_substituted);
  auto audited = through_proxy({"pcr", "read", "16", "--protect", "audit"});
  EXPECT_EQ(audited.exit_code, 0) << describe(audited);
  EXPECT_EQ(audited.out, to_hex(pcr()) + "\n");
}

TEST_F(InterposerTest, ProofForgedIdentityDowngradesToPlain) {
  const Identity& mchp = forged_identities().front();
  Bytes before = pcr();
  proxy_->set_rule(forged_identity_rule(mchp));
  auto r = through_proxy({"pcr", "extend", "16", to_hex(client_digest())});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(pcr(), extended(before, attacker_digest()));
  expect_no_handles("after the forged identity");
}

}  // namespace
}  // namespace tpmsec::testing
