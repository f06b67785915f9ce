// Full replay of the session transcript recorded against libtpms
// (tests/data/session-transcript-libtpms.json; swtpm 0.7.1 / libtpms 0.9.2).
//
// Every command is rebuilt byte for byte by the real pipeline -- Tpm::run()
// with the project's HmacSession objects and Auth::password() -- from the
// recorded inputs (nonces, ephemeral keys, authValues, parameters). A replay
// transport compares each command with the recorded bytes (failing with a
// readable diff) and answers with the recorded response, which the pipeline
// then authenticates and decrypts. Every intermediate value the transcript
// records (Z, salt, sessionKey, names, cpHash, HMAC key, command HMAC, CFB key
// and IV, XOR mask, first-parameter plaintext and ciphertext, rpHash, response
// HMAC, decrypted response parameter) is recomputed with the library's
// functions and compared, and a step whose fields were not all looked at fails.
//
// The negative tests flip one bit of a recorded response -- in its HMAC, in
// its encrypted parameter, in a plain parameter -- at every protected step and
// expect an integrity failure, and check that a command differing from the
// recording fails the replay with a diff.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "support/handle_listing.h"
#include "support/test_data.h"
#include "testing/transport_doubles.h"
#include "tpmsec/bytes.h"
#include "tpmsec/command.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/result.h"
#include "tpmsec/salt.h"
#include "tpmsec/session.h"
#include "tpmsec/structures.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using nlohmann::json;

constexpr uint16_t kHash = alg::kSha256;  // the transcript's session hash and nameAlg
constexpr size_t kTranscriptSteps = 19;

// ---------------------------------------------------------------------------
// Transcript access

using testing::H;
Bytes copy(ByteView v) { return Bytes(v.begin(), v.end()); }

json load_transcript() {
  std::string path = std::string(TPMSEC_TEST_DATA) + "/session-transcript-libtpms.json";
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot open " << path;
    return json::object();
  }
  json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    ADD_FAILURE() << path << " is not a JSON object";
    return json::object();
  }
  return doc;
}

const json& transcript_steps() {
  static const json steps = [] {
    json doc = load_transcript();
    auto it = doc.find("steps");
    if (it == doc.end() || !it->is_array()) {
      ADD_FAILURE() << "the transcript has no \"steps\" array";
      return json::array();
    }
    return *it;
  }();
  return steps;
}

std::string step_name(size_t index) {
  const json& s = transcript_steps()[index];
  auto it = s.find("step");
  return it != s.end() && it->is_string() ? it->get<std::string>() : "(unnamed)";
}
std::string step_label(size_t index) { return "step " + std::to_string(index) + ": " + step_name(index); }

// One recorded step. Every accessor records that the field was looked at;
// expect_all_fields_checked() then fails for any recorded value the replay
// ignored, so a field added to the transcript cannot go unverified.
class Step {
 public:
  Step(size_t index, const json& j) : index_(index), j_(j) {}

  size_t index() const { return index_; }
  std::string name() const { return step_name(index_); }
  bool has(const std::string& key) const { return j_.contains(key); }

  Bytes hex(const std::string& key) {
    const json* v = field(key);
    if (!v || !v->is_string()) {
      ADD_FAILURE() << name() << ": field " << key << " is not a hex string";
      return {};
    }
    return H(v->get<std::string>());
  }
  std::string text(const std::string& key) {
    const json* v = field(key);
    return v && v->is_string() ? v->get<std::string>() : std::string();
  }
  bool flag(const std::string& key) {
    const json* v = field(key);
    if (!v || !v->is_boolean()) {
      ADD_FAILURE() << name() << ": field " << key << " is not a boolean";
      return false;
    }
    return v->get<bool>();
  }
  uint64_t number(const std::string& key) {
    const json* v = field(key);
    if (!v || !v->is_number_unsigned()) {
      ADD_FAILURE() << name() << ": field " << key << " is not an unsigned number";
      return 0;
    }
    return v->get<uint64_t>();
  }
  uint32_t u32(const std::string& key) {
    Bytes b = hex(key);
    if (b.size() != 4) {
      ADD_FAILURE() << name() << ": field " << key << " is not 4 bytes";
      return 0;
    }
    return load_be32(b.data());
  }
  std::vector<Bytes> hex_list(const std::string& key) {
    std::vector<Bytes> out;
    const json* v = field(key);
    if (!v || !v->is_array()) {
      ADD_FAILURE() << name() << ": field " << key << " is not a list";
      return out;
    }
    for (const json& e : *v) out.push_back(e.is_string() ? H(e.get<std::string>()) : Bytes{});
    return out;
  }
  // A field's value without marking it checked (to pick an object to use).
  const json& peek(const std::string& key) const {
    static const json kNull;
    auto it = j_.find(key);
    return it == j_.end() ? kNull : *it;
  }

  void expect_all_fields_checked() const {
    for (const auto& [key, value] : j_.items()) {
      EXPECT_TRUE(used_.count(key)) << name() << ": recorded field \"" << key << "\" was never checked";
    }
  }

 private:
  const json* field(const std::string& key) {
    used_.insert(key);
    auto it = j_.find(key);
    if (it == j_.end()) {
      ADD_FAILURE() << name() << ": no field " << key;
      return nullptr;
    }
    return &*it;
  }

  size_t index_;
  const json& j_;
  std::set<std::string> used_{"step"};
};

// ---------------------------------------------------------------------------
// Recorded bytes, split with the wire reader (independently of the pipeline)

struct AuthEntry {
  uint32_t handle = 0;  // command side only
  Bytes nonce;
  uint8_t attributes = 0;
  Bytes hmac;
};

struct CommandParts {
  uint16_t tag = 0;
  uint32_t code = 0;
  std::vector<uint32_t> handles;
  std::vector<AuthEntry> auths;
  Bytes parameters;
};

CommandParts split_command(ByteView bytes, size_t handle_count) {
  CommandParts c;
  Reader r(bytes);
  c.tag = r.u16("tag");
  uint32_t size = r.u32("commandSize");
  c.code = r.u32("commandCode");
  for (size_t i = 0; i < handle_count; ++i) c.handles.push_back(r.u32("handle"));
  if (c.tag == st::kSessions) {
    uint32_t auth_size = r.u32("authorizationSize");
    Reader area = r.sub(auth_size, "authorization area");
    while (area.ok() && area.remaining() > 0) {
      AuthEntry e;
      e.handle = area.u32("sessionHandle");
      e.nonce = copy(area.tpm2b("nonce"));
      e.attributes = area.u8("sessionAttributes");
      e.hmac = copy(area.tpm2b("hmac"));
      c.auths.push_back(std::move(e));
    }
    r.absorb(area);
  }
  c.parameters = copy(r.rest());
  EXPECT_TRUE(r.ok()) << "the recorded command does not parse: " << r.status().error().message();
  EXPECT_EQ(size, bytes.size()) << "recorded commandSize";
  return c;
}

struct ResponseParts {
  uint16_t tag = 0;
  uint32_t code = 0;
  std::vector<uint32_t> handles;
  size_t parameters_offset = 0;  // where the parameter area starts in the response
  Bytes parameters;
  std::vector<AuthEntry> auths;
};

ResponseParts split_response(ByteView bytes, size_t handle_count) {
  ResponseParts p;
  Reader r(bytes);
  p.tag = r.u16("tag");
  uint32_t size = r.u32("responseSize");
  p.code = r.u32("responseCode");
  if (r.ok() && p.code == 0) {
    for (size_t i = 0; i < handle_count; ++i) p.handles.push_back(r.u32("handle"));
    if (p.tag == st::kSessions) {
      uint32_t param_size = r.u32("parameterSize");
      p.parameters_offset = r.offset();
      p.parameters = copy(r.bytes(param_size, "parameters"));
      while (r.ok() && r.remaining() > 0) {
        AuthEntry e;
        e.nonce = copy(r.tpm2b("nonce"));
        e.attributes = r.u8("sessionAttributes");
        e.hmac = copy(r.tpm2b("hmac"));
        p.auths.push_back(std::move(e));
      }
    } else {
      p.parameters_offset = r.offset();
      p.parameters = copy(r.rest());
    }
  }
  EXPECT_TRUE(r.ok()) << "the recorded response does not parse: " << r.status().error().message();
  EXPECT_EQ(size, bytes.size()) << "recorded responseSize";
  return p;
}

// The data bytes of the TPM2B that opens `parameters` (what parameter encryption covers).
Bytes first_tpm2b_data(ByteView parameters) {
  Reader r(parameters);
  ByteView data = r.tpm2b("first parameter");
  EXPECT_TRUE(r.ok()) << "first parameter is not a TPM2B";
  return copy(data);
}

// ---------------------------------------------------------------------------
// Replay transport

// A byte where the library knowingly differs from the recording. The replay
// insists the difference is exactly this one (so it is re-examined when the
// library changes) and compares every other byte.
struct KnownDeviation {
  size_t offset;
  uint8_t recorded;
  uint8_t built;
  std::string reason;
};

// Rows of 16 bytes where `recorded` and `built` differ, with ^^ under each differing byte.
std::string byte_diff(ByteView recorded, ByteView built) {
  std::ostringstream out;
  size_t n = std::max(recorded.size(), built.size());
  size_t first = 0;
  while (first < recorded.size() && first < built.size() && recorded[first] == built[first]) ++first;
  out << "recorded " << recorded.size() << " bytes, built " << built.size() << " bytes; first difference at offset "
      << first << "\n";
  auto cell = [](ByteView b, size_t i) {
    static constexpr char kDigits[] = "0123456789abcdef";
    if (i >= b.size()) return std::string("   ");
    return std::string{kDigits[b[i] >> 4], kDigits[b[i] & 0xf], ' '};
  };
  int shown = 0;
  for (size_t row = 0; row < n; row += 16) {
    std::string rec, got, marks;
    bool differs = false;
    for (size_t i = row; i < row + 16 && i < n; ++i) {
      bool d = i >= recorded.size() || i >= built.size() || recorded[i] != built[i];
      differs |= d;
      rec += cell(recorded, i);
      got += cell(built, i);
      marks += d ? "^^ " : "   ";
    }
    if (!differs) continue;
    if (++shown > 16) {
      out << "  ...\n";
      break;
    }
    char offset[24];
    std::snprintf(offset, sizeof offset, "%04zx", row);
    out << "  " << offset << "  recorded " << rec << "\n        built    " << got << "\n                 " << marks
        << "\n";
  }
  return out.str();
}

// Answers each command with the recorded response once it has checked that
// the command is byte for byte the recorded one: the responder of a
// ScriptedTransport (testing/transport_doubles.h), `transport`.
class ReplayScript {
 public:
  ReplayScript() {
    transport.set_recording(false);
    transport.respond_with([this](ByteView command) { return answer(command); });
  }
  ReplayScript(const ReplayScript&) = delete;
  ReplayScript& operator=(const ReplayScript&) = delete;

  testing::ScriptedTransport transport{"replay"};

  void expect(std::string label, Bytes command, Bytes response, std::vector<KnownDeviation> deviations = {}) {
    if (pending_) ADD_FAILURE() << "replay: the command of " << pending_->label << " was never sent";
    pending_ = Exchange{std::move(label), std::move(command), std::move(response), std::move(deviations)};
  }
  // True when the expected command was sent (or none was expected).
  bool idle() const { return !pending_.has_value(); }
  void clear() { pending_.reset(); }
  int exchanges() const { return exchanges_; }

  Result<Bytes> answer(ByteView command) {
    // The recordings start on a TPM without handles; Linux keeps no handle
    // ledger, tpmsec lists the handles before its first creating command.
    if (testing::is_handle_listing(command)) return testing::empty_handle_listing();
    if (!pending_) {
      ADD_FAILURE() << "replay: unexpected command, nothing recorded for it: " << to_hex(command);
      return runtime_error("replay: no recorded exchange for this command");
    }
    Exchange ex = std::move(*pending_);
    pending_.reset();
    Bytes built = copy(command);
    for (const KnownDeviation& d : ex.deviations) {
      if (d.offset >= ex.command.size() || ex.command[d.offset] != d.recorded) {
        ADD_FAILURE() << ex.label << ": the known deviation at offset " << d.offset << " does not match the recording ("
                      << d.reason << ")";
        continue;
      }
      if (d.offset >= built.size() || built[d.offset] != d.built) {
        ADD_FAILURE() << ex.label << ": the known deviation at offset " << d.offset << " (" << d.reason
                      << ") no longer occurs; the library changed, update the replay";
        continue;
      }
      built[d.offset] = d.recorded;
    }
    if (built != ex.command) {
      ADD_FAILURE() << ex.label << ": the command differs from the recording\n" << byte_diff(ex.command, built);
      return runtime_error("replay: the command differs from the recording");
    }
    ++exchanges_;
    return ex.response;
  }

 private:
  struct Exchange {
    std::string label;
    Bytes command;
    Bytes response;
    std::vector<KnownDeviation> deviations;
  };
  std::optional<Exchange> pending_;
  int exchanges_ = 0;
};

// Sessions in the replay draw no randomness: every nonce comes from the transcript.
// The nonceCallers of the transcript, one per command, in place of a random
// source: anything drawn beyond them is a failure.
class ScriptedNonces final : public crypto::RandomSource {
 public:
  std::optional<Bytes> next;
  Status fill(MutableByteView out) override {
    if (!next || next->size() != out.size()) {
      ADD_FAILURE() << "the replay drew randomness the transcript does not give";
      return runtime_error("replay: no randomness");
    }
    std::copy(next->begin(), next->end(), out.begin());
    next.reset();
    return ok_status();
  }
};

// ---------------------------------------------------------------------------
// The replay

// The sealed-data object the transcript creates: keyed-hash, SHA-256 name,
// fixedTPM | fixedParent | userWithAuth | noDA (0x452), NULL scheme, empty unique.
Public sealed_data_template() {
  Public p;
  p.type = alg::kKeyedHash;
  p.name_alg = alg::kSha256;
  p.attributes = object_attr::kFixedTpm | object_attr::kFixedParent | object_attr::kUserWithAuth | object_attr::kNoDa;
  p.scheme = Scheme{alg::kNull, 0, 0};
  return p;
}

// What the pipeline said when one step ran with a tampered response.
struct TamperOutcome {
  Status status;
  bool session_usable_after = true;
  Bytes nonce_tpm_before;
  Bytes nonce_tpm_after;
};

class Replayer {
 public:
  Replayer() : tpm_(transport_.transport) {}

  // Replays one step (they depend on each other: run them in order).
  void run_step(size_t index) {
    const json& all = transcript_steps();
    ASSERT_LT(index, all.size());
    Step s(index, all[index]);
    std::string name = s.name();
    if (name.starts_with("CreatePrimary")) {
      create_primary(s);
    } else if (name.starts_with("StartAuthSession")) {
      start_auth_session(s);
    } else if (name.starts_with("ContextSave")) {
      context_save(s);
    } else if (name.starts_with("ContextLoad")) {
      context_load(s);
    } else if (s.has("commandCode")) {
      protected_command(s);
    } else {
      ADD_FAILURE() << "no replay for step " << name;
    }
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_TRUE(transport_.idle()) << "the recorded command of this step was never sent";
    transport_.clear();
    if (tamper_ && tamper_->step == index) return;
    s.expect_all_fields_checked();
    ++steps_replayed_;
  }

  // Replays the steps before `target`, then runs `target` with `response`
  // instead of its recorded response; returns what the pipeline said.
  std::optional<TamperOutcome> replay_tampered(size_t target, Bytes response) {
    tamper_ = Tamper{target, std::move(response), std::nullopt};
    for (size_t i = 0; i <= target; ++i) {
      SCOPED_TRACE(step_label(i));
      run_step(i);
      if (::testing::Test::HasFatalFailure()) return std::nullopt;
    }
    return tamper_->outcome;
  }

  size_t steps_replayed() const { return steps_replayed_; }
  int checks() const { return checks_; }
  int exchanges() const { return transport_.exchanges(); }

 private:
  struct NullKeyState {
    bool ready = false;
    uint32_t handle = 0;
    Public public_area;
    Bytes name;
    Bytes user_auth;
    NamedHandle named() const { return {handle, name}; }
  };
  struct SessionState {
    std::unique_ptr<HmacSession> session;
    Bytes session_key;
    Bytes bind_name;  // empty when unbound
    SymDef symmetric;
  };
  struct SealedObject {
    Bytes user_auth;
    Bytes data;
    cmd::Create::Response created;
    Bytes name;
    uint32_t handle = 0;  // 0 while not loaded
  };
  struct Tamper {
    size_t step;
    Bytes response;
    std::optional<TamperOutcome> outcome;
  };

  // Compares one recorded value with the value the library computed.
  void check(std::string_view what, ByteView recorded, ByteView computed) {
    ++checks_;
    EXPECT_EQ(to_hex(computed), to_hex(recorded)) << what << " (left: computed by tpmsec, right: recorded)";
  }
  template <class A, class B>
  void check_value(std::string_view what, const A& recorded, const B& computed) {
    ++checks_;
    EXPECT_EQ(computed, recorded) << what << " (left: computed by tpmsec, right: recorded)";
  }

  HmacSession* session_with_handle(uint32_t handle) {
    for (auto& [name, st] : sessions_) {
      if (st.session->handle() == handle) return st.session.get();
    }
    return nullptr;
  }

  // Step 0: CreatePrimary of the null key under TPM_RH_NULL with a password session.
  void create_primary(Step& s) {
    Bytes command = s.hex("command");
    Bytes response = s.hex("response");
    // The recorded inputs: the password session's password and inSensitive;
    // the public template is tpmsec's own null-key template.
    CommandParts rec = split_command(command, cmd::CreatePrimary::kInfo.handle_count);
    ASSERT_EQ(rec.handles, std::vector<uint32_t>{rh::kNull});
    ASSERT_EQ(rec.auths.size(), 1u);
    ASSERT_EQ(rec.auths[0].handle, rh::kPasswordSession);
    Bytes password = rec.auths[0].hmac;
    cmd::CreatePrimary c;
    c.primary_handle = NamedHandle::of(rh::kNull);
    Reader params(rec.parameters);
    unmarshal(params, c.in_sensitive);
    ASSERT_TRUE(params.ok()) << params.status().error().message();
    c.in_public.public_area = null_key_template(SaltKind::kEcc);

    // The recorder sent the password session with sessionAttributes 00;
    // PasswordSession::authorize always sends continueSession (01). The TPM
    // accepts both and answers 01. Offset: header 10, handle 4,
    // authorizationSize 4, sessionHandle 4, empty nonce 2.
    constexpr size_t kPasswordAttributesOffset = 10 + 4 + 4 + 4 + 2;
    transport_.expect(s.name(), command, response,
                      {{kPasswordAttributesOffset, 0x00, attr::kContinueSession,
                        "password session attributes: recorded 00, tpmsec sends continueSession"}});
    auto rsp = tpm_.run(c, {Auth::password(password)});
    ASSERT_TRUE(rsp.ok()) << rsp.error().message();

    const Public& pub = rsp->out_public.public_area;
    check("objectHandle", s.hex("objectHandle"), be32(rsp->object_handle));
    check("outPublic (re-marshalled)", s.hex("outPublic"), marshal_to_bytes(pub).value());
    auto name = compute_name(pub);
    ASSERT_TRUE(name.ok()) << name.error().message();
    Bytes recorded_name = s.hex("name");
    check("name = compute_name(outPublic)", recorded_name, *name);
    check("name returned by the TPM", recorded_name, rsp->name.bytes);
    check("tpmPointX", s.hex("tpmPointX"), pub.unique_x);
    check("tpmPointY", s.hex("tpmPointY"), pub.unique_y);
    Public expected = null_key_template(SaltKind::kEcc);
    expected.unique_x = pub.unique_x;
    expected.unique_y = pub.unique_y;
    EXPECT_TRUE(pub == expected) << "the TPM's public area is not the template with a filled-in point";
    Status on_curve = crypto::check_point_on_curve(pub.curve, crypto::EccPoint{pub.unique_x, pub.unique_y});
    EXPECT_TRUE(on_curve.ok()) << on_curve.error().message();

    null_key_.ready = true;
    null_key_.handle = rsp->object_handle;
    null_key_.public_area = pub;
    null_key_.name = *name;
    null_key_.user_auth = c.in_sensitive.user_auth;
  }

  // StartAuthSession salted to the null key (optionally bound to it).
  void start_auth_session(Step& s) {
    ASSERT_TRUE(null_key_.ready) << "StartAuthSession before the null key exists";
    const Public& key = null_key_.public_area;
    Bytes nonce_caller = s.hex("nonceCaller");
    Bytes ephemeral_private = s.hex("ephemeralPrivate");

    // Z = x(d_e * Q_null), salt = KDFe(Z, "SECRET", Q_e.x, Q_null.x).
    auto ecdh = crypto::ecdh_ephemeral(key.curve, crypto::EccPoint{key.unique_x, key.unique_y}, ephemeral_private);
    ASSERT_TRUE(ecdh.ok()) << ecdh.error().message();
    Bytes ephemeral_x = s.hex("ephemeralX");
    Bytes ephemeral_y = s.hex("ephemeralY");
    check("ephemeralX", ephemeral_x, ecdh->ephemeral_public.x);
    check("ephemeralY", ephemeral_y, ecdh->ephemeral_public.y);
    check("Z", s.hex("Z"), ecdh->z.view());
    Bytes salt = s.hex("salt");
    auto kdfe_salt = crypto::kdfe(kHash, ecdh->z.view(), "SECRET", ecdh->ephemeral_public.x, key.unique_x, 256);
    ASSERT_TRUE(kdfe_salt.ok()) << kdfe_salt.error().message();
    check("salt = KDFe(Z, SECRET, ephemeralX, tpmPointX)", salt, kdfe_salt->view());
    auto salted = make_salt_ecc(key, ephemeral_private);
    ASSERT_TRUE(salted.ok()) << salted.error().message();
    check("salt = make_salt_ecc(null key, ephemeralPrivate)", salt, salted->salt.view());

    // The recorded command's nonceCaller and encryptedSalt.
    Bytes command = s.hex("command");
    CommandParts rec = split_command(command, cmd::StartAuthSession::kInfo.handle_count);
    Reader params(rec.parameters);
    ByteView recorded_nonce = params.tpm2b("nonceCaller");
    ByteView recorded_secret = params.tpm2b("encryptedSalt");
    ASSERT_TRUE(params.ok()) << params.status().error().message();
    check("nonceCaller in the recorded command", nonce_caller, recorded_nonce);
    check("encryptedSalt = the one in the recorded command", recorded_secret, salted->encrypted_salt);
    Writer point;
    point.tpm2b(ephemeral_x, "TPMS_ECC_POINT.x");
    point.tpm2b(ephemeral_y, "TPMS_ECC_POINT.y");
    check("encryptedSalt = TPM2B(ephemeralX) || TPM2B(ephemeralY)", point.data(), salted->encrypted_salt);

    // Bind: TPM_RH_NULL (unbound) or the null key with its userAuth.
    uint32_t bind = s.u32("bind");
    Bytes bind_auth = s.hex("bindAuth");
    NamedHandle bind_handle = NamedHandle::of(rh::kNull);
    Bytes bind_name;
    if (bind == rh::kNull) {
      check("bindAuth of an unbound session", Bytes{}, bind_auth);
    } else {
      ASSERT_EQ(bind, null_key_.handle) << "this transcript binds only to the null key";
      bind_handle = null_key_.named();
      bind_name = null_key_.name;
      check("bindAuth = the null key's userAuth", null_key_.user_auth, bind_auth);
    }
    std::string symmetric_name = s.text("symmetric");
    SymDef symmetric;
    if (symmetric_name == "AES128CFB") {
      symmetric = SymDef::aes128_cfb();
    } else if (symmetric_name == "XOR") {
      symmetric = SymDef::xor_with(kHash);
    } else {
      FAIL() << "unknown symmetric \"" << symmetric_name << "\"";
    }

    cmd::StartAuthSession c;
    c.tpm_key = null_key_.named();
    c.bind = bind_handle;
    c.nonce_caller.bytes = nonce_caller;
    c.encrypted_salt.bytes = salted->encrypted_salt;
    c.session_type = se::kHmac;
    c.symmetric = symmetric;
    c.auth_hash = kHash;
    transport_.expect(s.name(), command, s.hex("response"));
    auto rsp = tpm_.run(c);
    ASSERT_TRUE(rsp.ok()) << rsp.error().message();
    check("sessionHandle", s.hex("sessionHandle"), be32(rsp->session_handle));
    check("nonceTPM", s.hex("nonceTPM"), rsp->nonce_tpm.bytes);

    // sessionKey = KDFa(bindAuth || salt, "ATH", nonceTPM, nonceCaller, 256).
    Bytes key_input = concat({trim_auth_value(bind_auth), salted->salt.view()});
    auto session_key = crypto::kdfa(kHash, key_input, "ATH", rsp->nonce_tpm.bytes, nonce_caller, 256);
    ASSERT_TRUE(session_key.ok()) << session_key.error().message();
    check("sessionKey", s.hex("sessionKey"), session_key->view());

    SessionState st;
    st.session_key = copy(session_key->view());
    st.bind_name = bind_name;
    st.symmetric = symmetric;
    st.session = std::make_unique<HmacSession>(nullptr /*no TPM: nothing to flush*/, rsp->session_handle, kHash,
                                               symmetric, std::move(*session_key), rsp->nonce_tpm.bytes, bind_name,
                                               attr::kContinueSession, &no_randomness_);
    sessions_[s.name()] = std::move(st);
  }

  // ContextSave of a session: HmacSession::save() is tpm.run(cmd::ContextSave{session handle}).
  void context_save(Step& s) {
    uint32_t saved_handle = s.u32("savedHandle");
    HmacSession* session = session_with_handle(saved_handle);
    ASSERT_NE(session, nullptr) << "no session has handle " << to_hex(be32(saved_handle));
    Bytes response = s.hex("response");
    transport_.expect(s.name(), s.hex("command"), response);
    auto saved = session->save(tpm_);
    ASSERT_TRUE(saved.ok()) << saved.error().message();
    check_value("sequence", s.number("sequence"), saved->sequence);
    check("savedHandle", be32(saved_handle), be32(saved->saved_handle));
    check("hierarchy", s.hex("hierarchy"), be32(saved->hierarchy));
    check_value("contextBlobSize", s.number("contextBlobSize"), uint64_t{saved->blob.size()});
    ResponseParts rp = split_response(response, cmd::ContextSave::kInfo.response_handle_count);
    check("TPMS_CONTEXT re-marshals to the recorded response parameters", rp.parameters,
          marshal_to_bytes(*saved).value());
    saved_context_ = *saved;
  }

  // ContextLoad of the saved session: HmacSession::load() is
  // tpm.run(cmd::ContextLoad{context}) and checks the handle that comes back.
  // The same session object is used afterwards.
  void context_load(Step& s) {
    ASSERT_TRUE(saved_context_.has_value()) << "ContextLoad before ContextSave";
    HmacSession* session = session_with_handle(saved_context_->saved_handle);
    ASSERT_NE(session, nullptr);
    Bytes response = s.hex("response");
    transport_.expect(s.name(), s.hex("command"), response);
    Status loaded = session->load(tpm_, *saved_context_);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message();
    ResponseParts rp = split_response(response, cmd::ContextLoad::kInfo.response_handle_count);
    ASSERT_EQ(rp.handles.size(), 1u);
    Bytes loaded_handle = s.hex("loadedHandle");
    check("loadedHandle in the response", loaded_handle, be32(rp.handles[0]));
    check("loadedHandle = the session's handle", loaded_handle, be32(session->handle()));
    EXPECT_TRUE(session->usable());
  }

  // A command authorized (and possibly encrypted) by an HMAC session.
  void protected_command(Step& s) {
    std::string session_name = s.text("session");
    auto it = sessions_.find(session_name);
    ASSERT_NE(it, sessions_.end()) << "the step uses session \"" << session_name << "\", which was not started";
    SessionState& st = it->second;
    Bytes auth_value = s.hex("authValue");
    const json& code_field = s.peek("commandCode");
    ASSERT_TRUE(code_field.is_string());
    Bytes code_bytes = H(code_field.get<std::string>());
    ASSERT_EQ(code_bytes.size(), 4u);
    uint32_t code = load_be32(code_bytes.data());  // checked against the command in run_protected

    switch (code) {
      case cc::kGetRandom: {
        cmd::GetRandom c;
        // The request is as long as the plaintext the TPM returned.
        c.bytes_requested = static_cast<uint16_t>(s.hex("rspFirstParamPlain").size());
        check("authValue of a session authorizing nothing", Bytes{}, auth_value);
        run_protected(s, st, c, auth_value, [&](cmd::GetRandom::Response& r) {
          check("randomBytes (decrypted by the pipeline)", s.hex("rspFirstParamPlain"), r.random_bytes.bytes);
        });
        break;
      }
      case cc::kCreate: {
        ASSERT_TRUE(null_key_.ready);
        cmd::Create c;
        c.parent_handle = null_key_.named();
        // inSensitive is recorded as the plaintext of the first parameter.
        Bytes plain = s.hex("firstParamPlain");
        Reader r(plain);
        ByteView user_auth = r.tpm2b("TPMS_SENSITIVE_CREATE.userAuth");
        ByteView data = r.tpm2b("TPMS_SENSITIVE_CREATE.data");
        r.expect_end("TPMS_SENSITIVE_CREATE");
        ASSERT_TRUE(r.ok()) << r.status().error().message();
        c.in_sensitive.user_auth = copy(user_auth);
        c.in_sensitive.data = copy(data);
        c.in_public.public_area = sealed_data_template();
        check("authValue = the parent's userAuth", null_key_.user_auth, auth_value);
        run_protected(s, st, c, auth_value, [&](cmd::Create::Response& r) {
          const Public& pub = r.out_public.public_area;
          Public expected = sealed_data_template();
          expected.unique_x = pub.unique_x;
          EXPECT_TRUE(pub == expected) << "outPublic is not the sealed-data template";
          EXPECT_EQ(pub.unique_x.size(), 32u);
          auto name = compute_name(pub);
          ASSERT_TRUE(name.ok()) << name.error().message();
          objects_.push_back(SealedObject{c.in_sensitive.user_auth, c.in_sensitive.data, r, *name, 0});
        });
        break;
      }
      case cc::kLoad: {
        ASSERT_TRUE(null_key_.ready);
        ASSERT_FALSE(objects_.empty()) << "Load before Create";
        // The transcript loads what it has just created.
        SealedObject& obj = objects_.back();
        cmd::Load c;
        c.parent_handle = null_key_.named();
        c.in_private = obj.created.out_private;
        c.in_public = obj.created.out_public;
        check("authValue = the parent's userAuth", null_key_.user_auth, auth_value);
        // The recorder flushed the objects it had loaded before (FlushContext
        // is not part of the transcript): the ledger must not hold them, or it
        // refuses their handle when the TPM hands it out again.
        for (const SealedObject& other : objects_) {
          if (other.handle != 0) tpm_.forget(other.handle);
        }
        run_protected(s, st, c, auth_value, [&](cmd::Load::Response& r) {
          check("name returned by Load = compute_name(outPublic of Create)", r.name.bytes, obj.name);
          EXPECT_EQ(r.object_handle >> 24, ht::kTransient);
          // A handle comes back only after the recorder flushed its previous
          // holder (FlushContext is not part of the transcript).
          for (SealedObject& other : objects_) {
            if (other.handle == r.object_handle) other.handle = 0;
          }
          obj.handle = r.object_handle;
        });
        break;
      }
      case cc::kUnseal: {
        // The object is the loaded one with the recorded name.
        const json& names = s.peek("names");
        ASSERT_TRUE(names.is_array() && names.size() == 1 && names[0].is_string());
        Bytes wanted = H(names[0].get<std::string>());
        SealedObject* obj = nullptr;
        for (SealedObject& o : objects_) {
          if (o.name == wanted && o.handle != 0) obj = &o;
        }
        ASSERT_NE(obj, nullptr) << "no loaded object is named " << to_hex(wanted);
        check("authValue = the object's userAuth", obj->user_auth, auth_value);
        cmd::Unseal c;
        c.item_handle = NamedHandle{obj->handle, obj->name};
        run_protected(s, st, c, auth_value, [&](cmd::Unseal::Response& r) {
          check("outData (decrypted by the pipeline)", s.hex("rspFirstParamPlain"), r.out_data.bytes);
          check("outData = the data sealed by Create", obj->data, r.out_data.bytes);
        });
        break;
      }
      default:
        ADD_FAILURE() << "no replay for command code " << to_hex(be32(code))
                      << " (not defined in include/tpmsec/commands.h)";
    }
  }

  // Recomputes the recorded intermediate values of one protected command,
  // then runs it through the pipeline against the recorded bytes.
  template <class C, class Done>
  void run_protected(Step& s, SessionState& st, const C& command, ByteView auth_value, Done done) {
    const CommandInfo& info = C::kInfo;
    HmacSession& session = *st.session;
    check("commandCode", s.hex("commandCode"), be32(info.code));
    Bytes nonce_caller = s.hex("nonceCaller");
    Bytes nonce_tpm_older = s.hex("nonceTPMOlder");
    Bytes attributes = s.hex("sessionAttributes");
    ASSERT_EQ(attributes.size(), 1u);
    const uint8_t attrs = attributes[0];
    check("nonceTPMOlder = the session's nonceTPM", nonce_tpm_older, session.nonce_tpm());

    auto handles = std::apply([](const auto&... h) { return std::array<const NamedHandle*, sizeof...(h)>{&h...}; },
                              command.handles());
    std::vector<Bytes> names = s.hex_list("names");
    ASSERT_EQ(names.size(), handles.size());
    for (size_t i = 0; i < handles.size(); ++i) check("names[" + std::to_string(i) + "]", names[i], handles[i]->name);

    // HMAC key: sessionKey || authValue without trailing zeros, or sessionKey
    // alone when a bound session authorizes its own bind entity. The
    // parameter-encryption key always appends the authValue.
    const NamedHandle* entity = info.auth_count > 0 ? handles[0] : nullptr;
    bool bound_to_target = !st.bind_name.empty() && entity != nullptr && entity->name == st.bind_name;
    check_value("boundToTarget", s.flag("boundToTarget"), bound_to_target);
    Bytes param_key = concat({st.session_key, trim_auth_value(auth_value)});
    check("paramCryptKeyInput = sessionKey || trim_auth_value(authValue)", s.hex("paramCryptKeyInput"), param_key);
    Bytes hmac_key = bound_to_target ? st.session_key : param_key;
    check("hmacKey", s.hex("hmacKey"), hmac_key);

    // The parameters as sent: the first one encrypted when decrypt is set.
    Writer w;
    marshal_all(w, command.params());
    Bytes parameters = w.finish().value();
    if (attrs & attr::kDecrypt) {
      ASSERT_TRUE(info.command_param_tpm2b);
      ASSERT_EQ(st.symmetric.algorithm, alg::kAes) << "the transcript encrypts commands only with AES-CFB";
      auto key_iv = crypto::kdfa(kHash, param_key, "CFB", nonce_caller, nonce_tpm_older, 256);
      ASSERT_TRUE(key_iv.ok()) << key_iv.error().message();
      ByteView cfb_key = key_iv->view().first(16);
      ByteView cfb_iv = key_iv->view().subspan(16, 16);
      check("cmdCfbKey = KDFa(CFB, nonceCaller, nonceTPMOlder)[0..16)", s.hex("cmdCfbKey"), cfb_key);
      check("cmdCfbIv = KDFa(CFB, nonceCaller, nonceTPMOlder)[16..32)", s.hex("cmdCfbIv"), cfb_iv);
      ASSERT_GE(parameters.size(), 2u);
      size_t size = size_t{parameters[0]} << 8 | parameters[1];
      ASSERT_LE(size + 2, parameters.size());
      MutableByteView data(parameters.data() + 2, size);
      check("firstParamPlain", s.hex("firstParamPlain"), data);
      Status encrypted = crypto::aes_cfb_encrypt(cfb_key, cfb_iv, data);
      ASSERT_TRUE(encrypted.ok()) << encrypted.error().message();
      check("firstParamCipher", s.hex("firstParamCipher"), data);
    }
    auto cp_hash = compute_cp_hash(kHash, info.code, handles, parameters);
    ASSERT_TRUE(cp_hash.ok()) << cp_hash.error().message();
    check("cpHash = compute_cp_hash(...)", s.hex("cpHash"), *cp_hash);
    auto command_hmac = crypto::hmac(kHash, hmac_key, {*cp_hash, nonce_caller, nonce_tpm_older, ByteView(&attrs, 1)});
    ASSERT_TRUE(command_hmac.ok()) << command_hmac.error().message();
    check("commandHmac = HMAC(hmacKey, cpHash || nonceCaller || nonceTPM || attributes)", s.hex("commandHmac"),
          *command_hmac);

    // The recorded command carries exactly these values.
    Bytes command_bytes = s.hex("command");
    CommandParts rec = split_command(command_bytes, info.handle_count);
    ASSERT_EQ(rec.auths.size(), 1u);
    check("recorded command: session handle", be32(rec.auths[0].handle), be32(session.handle()));
    check("recorded command: nonceCaller", rec.auths[0].nonce, nonce_caller);
    check("recorded command: sessionAttributes", ByteView(&rec.auths[0].attributes, 1), attributes);
    check("recorded command: hmac", rec.auths[0].hmac, *command_hmac);
    check("recorded command: parameters as sent", rec.parameters, parameters);

    // The recorded response: rpHash, response HMAC, and the encrypted parameter.
    Bytes response = s.hex("response");
    ResponseParts rp = split_response(response, info.response_handle_count);
    check("rc", s.hex("rc"), be32(rp.code));
    ASSERT_EQ(rp.code, 0u);
    ASSERT_EQ(rp.auths.size(), 1u);
    Bytes nonce_tpm_newer = s.hex("nonceTPMNewer");
    Bytes response_attributes = s.hex("responseAttributes");
    Bytes response_hmac = s.hex("responseHmac");
    ASSERT_EQ(response_attributes.size(), 1u);
    check("recorded response: nonceTPM", nonce_tpm_newer, rp.auths[0].nonce);
    check("recorded response: sessionAttributes", response_attributes, ByteView(&rp.auths[0].attributes, 1));
    check("recorded response: hmac", response_hmac, rp.auths[0].hmac);
    auto rp_hash = compute_rp_hash(kHash, rp.code, info.code, rp.parameters);
    ASSERT_TRUE(rp_hash.ok()) << rp_hash.error().message();
    check("rpHash = compute_rp_hash(...)", s.hex("rpHash"), *rp_hash);
    auto expected_hmac = crypto::hmac(kHash, hmac_key, {*rp_hash, nonce_tpm_newer, nonce_caller, response_attributes});
    ASSERT_TRUE(expected_hmac.ok()) << expected_hmac.error().message();
    check("responseHmac = HMAC(hmacKey, rpHash || nonceTPMNewer || nonceCaller || attributes)", response_hmac,
          *expected_hmac);
    check_value("responseHmacVerified", s.flag("responseHmacVerified"), true);
    if (attrs & attr::kEncrypt) {
      ASSERT_TRUE(info.response_param_tpm2b);
      Bytes cipher = first_tpm2b_data(rp.parameters);
      check("rspFirstParamCipher", s.hex("rspFirstParamCipher"), cipher);
      Bytes plain = cipher;
      if (st.symmetric.algorithm == alg::kXor) {
        auto mask = crypto::kdfa(kHash, param_key, "XOR", nonce_tpm_newer, nonce_caller,
                                 static_cast<uint32_t>(8 * cipher.size()));
        ASSERT_TRUE(mask.ok()) << mask.error().message();
        check("rspXorMask = KDFa(XOR, nonceTPMNewer, nonceCaller)", s.hex("rspXorMask"), mask->view());
        for (size_t i = 0; i < plain.size(); ++i) plain[i] ^= mask->view()[i];
        Bytes via_library = cipher;
        Status xored = crypto::xor_obfuscate(st.symmetric.key_bits, param_key, nonce_tpm_newer, nonce_caller,
                                             MutableByteView(via_library));
        ASSERT_TRUE(xored.ok()) << xored.error().message();
        check("xor_obfuscate(ciphertext)", plain, via_library);
      } else {
        auto key_iv = crypto::kdfa(kHash, param_key, "CFB", nonce_tpm_newer, nonce_caller, 256);
        ASSERT_TRUE(key_iv.ok()) << key_iv.error().message();
        ByteView cfb_key = key_iv->view().first(16);
        ByteView cfb_iv = key_iv->view().subspan(16, 16);
        check("rspCfbKey = KDFa(CFB, nonceTPMNewer, nonceCaller)[0..16)", s.hex("rspCfbKey"), cfb_key);
        check("rspCfbIv = KDFa(CFB, nonceTPMNewer, nonceCaller)[16..32)", s.hex("rspCfbIv"), cfb_iv);
        Status decrypted = crypto::aes_cfb_decrypt(cfb_key, cfb_iv, MutableByteView(plain));
        ASSERT_TRUE(decrypted.ok()) << decrypted.error().message();
      }
      check("rspFirstParamPlain", s.hex("rspFirstParamPlain"), plain);
    }

    // The real pipeline: the replay transport compares the command it builds
    // and answers with the recorded (or, for a negative test, tampered) response.
    bool tampered = tamper_ && tamper_->step == s.index();
    Bytes nonce_tpm_before = copy(session.nonce_tpm());
    session.set_attributes(attrs);
    no_randomness_.next = nonce_caller;
    transport_.expect(s.name(), command_bytes, tampered ? tamper_->response : response);
    auto result = tpm_.run(command, {Auth{&session, auth_value}});
    if (tampered) {
      TamperOutcome outcome;
      if (!result.ok()) outcome.status = result.error();
      outcome.session_usable_after = session.usable();
      outcome.nonce_tpm_before = nonce_tpm_before;
      outcome.nonce_tpm_after = copy(session.nonce_tpm());
      tamper_->outcome = std::move(outcome);
      return;
    }
    ASSERT_TRUE(result.ok()) << result.error().message();
    check("the session's nonceCaller", nonce_caller, session.nonce_caller());
    check("the session's nonceTPM rolled to nonceTPMNewer", nonce_tpm_newer, session.nonce_tpm());
    EXPECT_TRUE(session.usable());
    done(*result);
  }

  ScriptedNonces no_randomness_;
  ReplayScript transport_;
  Tpm tpm_;
  NullKeyState null_key_;
  std::map<std::string, SessionState> sessions_;  // by the name of their StartAuthSession step
  std::vector<SealedObject> objects_;
  std::optional<Context> saved_context_;
  std::optional<Tamper> tamper_;
  size_t steps_replayed_ = 0;
  int checks_ = 0;
};

// The steps of protected commands (they record a response HMAC).
std::vector<size_t> protected_steps() {
  std::vector<size_t> out;
  const json& all = transcript_steps();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].contains("responseHmac")) out.push_back(i);
  }
  return out;
}

Bytes recorded_response(size_t index) { return H(transcript_steps()[index]["response"].get<std::string>()); }

// Where the data of the first response parameter starts in a recorded response.
size_t first_parameter_data_offset(size_t index) {
  const json& s = transcript_steps()[index];
  uint32_t code = load_be32(H(s["commandCode"].get<std::string>()).data());
  size_t handles = 0;
  switch (code) {
    case cc::kGetRandom:
      handles = cmd::GetRandom::kInfo.response_handle_count;
      break;
    case cc::kCreate:
      handles = cmd::Create::kInfo.response_handle_count;
      break;
    case cc::kLoad:
      handles = cmd::Load::kInfo.response_handle_count;
      break;
    case cc::kUnseal:
      handles = cmd::Unseal::kInfo.response_handle_count;
      break;
    default:
      ADD_FAILURE() << "unexpected command code in " << step_label(index);
  }
  ResponseParts rp = split_response(recorded_response(index), handles);
  return rp.parameters_offset + 2;
}

// ---------------------------------------------------------------------------
// Tests

TEST(TranscriptReplay, EveryStepIsRebuiltVerifiedAndDecrypted) {
  const json& all = transcript_steps();
  ASSERT_EQ(all.size(), kTranscriptSteps);
  Replayer replay;
  for (size_t i = 0; i < all.size(); ++i) {
    SCOPED_TRACE(step_label(i));
    replay.run_step(i);
    ASSERT_FALSE(HasFatalFailure()) << "stopping: later steps build on " << step_label(i);
  }
  EXPECT_EQ(replay.steps_replayed(), kTranscriptSteps);
  EXPECT_EQ(replay.exchanges(), static_cast<int>(kTranscriptSteps));
  RecordProperty("steps", static_cast<int>(replay.steps_replayed()));
  RecordProperty("checks", replay.checks());
  std::cout << "[ replay   ] " << replay.steps_replayed() << " steps, " << replay.exchanges()
            << " command/response exchanges, " << replay.checks() << " recorded values compared\n";
}

TEST(TranscriptReplay, FlippedResponseHmacBitIsAnIntegrityFailure) {
  std::vector<size_t> targets = protected_steps();
  ASSERT_EQ(targets.size(), 13u);
  for (size_t target : targets) {
    SCOPED_TRACE("tampering with " + step_label(target));
    Bytes response = recorded_response(target);
    Bytes hmac = H(transcript_steps()[target]["responseHmac"].get<std::string>());
    ASSERT_GE(response.size(), hmac.size());
    // The response HMAC is the last field of the response.
    ASSERT_TRUE(std::equal(hmac.begin(), hmac.end(), response.end() - hmac.size()));
    response[response.size() - hmac.size() + 7] ^= 0x10;
    Replayer replay;
    auto outcome = replay.replay_tampered(target, response);
    ASSERT_TRUE(outcome.has_value());
    ASSERT_FALSE(outcome->status.ok()) << "a response with a flipped HMAC bit was accepted";
    EXPECT_EQ(outcome->status.error().kind(), ErrorKind::kIntegrity) << outcome->status.error().message();
    EXPECT_FALSE(outcome->session_usable_after);
    EXPECT_EQ(to_hex(outcome->nonce_tpm_after), to_hex(outcome->nonce_tpm_before))
        << "nonceTPM rolled on an unauthenticated response";
  }
}

TEST(TranscriptReplay, FlippedResponseCiphertextBitIsAnIntegrityFailure) {
  int tested = 0;
  for (size_t target : protected_steps()) {
    const json& s = transcript_steps()[target];
    if (!s.contains("rspFirstParamCipher")) continue;
    SCOPED_TRACE("tampering with " + step_label(target));
    Bytes response = recorded_response(target);
    Bytes cipher = H(s["rspFirstParamCipher"].get<std::string>());
    size_t offset = first_parameter_data_offset(target);
    ASSERT_LE(offset + cipher.size(), response.size());
    ASSERT_TRUE(std::equal(cipher.begin(), cipher.end(), response.begin() + offset));
    response[offset] ^= 0x80;  // rpHash covers the ciphertext
    Replayer replay;
    auto outcome = replay.replay_tampered(target, response);
    ASSERT_TRUE(outcome.has_value());
    ASSERT_FALSE(outcome->status.ok()) << "a response with a flipped ciphertext bit was accepted";
    EXPECT_EQ(outcome->status.error().kind(), ErrorKind::kIntegrity) << outcome->status.error().message();
    EXPECT_FALSE(outcome->session_usable_after);
    ++tested;
  }
  EXPECT_EQ(tested, 7);
}

TEST(TranscriptReplay, FlippedPlainResponseParameterBitIsAnIntegrityFailure) {
  int tested = 0;
  for (size_t target : protected_steps()) {
    if (transcript_steps()[target].contains("rspFirstParamCipher")) continue;
    SCOPED_TRACE("tampering with " + step_label(target));
    Bytes response = recorded_response(target);
    size_t offset = first_parameter_data_offset(target);
    ASSERT_LT(offset, response.size());
    response[offset] ^= 0x01;
    Replayer replay;
    auto outcome = replay.replay_tampered(target, response);
    ASSERT_TRUE(outcome.has_value());
    ASSERT_FALSE(outcome->status.ok()) << "a response with a flipped parameter bit was accepted";
    EXPECT_EQ(outcome->status.error().kind(), ErrorKind::kIntegrity) << outcome->status.error().message();
    ++tested;
  }
  EXPECT_EQ(tested, 6);
}

TEST(TranscriptReplay, ACommandThatDiffersFromTheRecordingFailsWithADiff) {
  size_t index = 0;
  while (index < transcript_steps().size() && step_name(index) != "ContextSave(session)") ++index;
  ASSERT_LT(index, transcript_steps().size());
  const json& s = transcript_steps()[index];
  ReplayScript transport;
  transport.expect(step_name(index), H(s["command"].get<std::string>()), recorded_response(index));
  Tpm tpm(transport.transport);
  std::optional<Result<cmd::ContextSave::Response>> result;
  // Session 0x02000001 instead of the recorded 0x02000000: the last handle byte (offset 13).
  EXPECT_NONFATAL_FAILURE(result.emplace(tpm.run(cmd::ContextSave{NamedHandle::of(0x02000001)})),
                          "first difference at offset 13");
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(result->ok());
}

}  // namespace
}  // namespace tpmsec
