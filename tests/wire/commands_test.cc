// Tests for the declarative command definitions of commands.h: parameter
// bytes against hand-written and recorded (libtpms transcript) bytes, response
// parameter parsing, and kInfo against TPM 2.0 Part 3.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "support/fault_injection.h"
#include "support/handle_listing.h"
#include "support/test_data.h"
#include "testing/transport_doubles.h"
#include "tpmsec/bytes.h"
#include "tpmsec/command.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/pcr.h"
#include "tpmsec/structures.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::H;
Bytes str(std::string_view s) { return Bytes(s.begin(), s.end()); }

template <class C>
Bytes params_of(const C& c) {
  Writer w;
  marshal_all(w, c.params());
  return w.finish().value();
}

// ---------------------------------------------------------------------------
// Recorded bytes (session-transcript-libtpms.json; swtpm 0.7.1 / libtpms 0.9.2).

// Step 0: CreatePrimary(RH_NULL, ECC P-256) with a password session.
constexpr std::string_view kCreatePrimaryCommand =
    "80020000004b000001314000000700000009400000090000000000000c0008706172656e7470770000001a0023000b00030472000000060080"
    "004300100003001000000000000000000000";
constexpr std::string_view kCreatePrimaryResponse =
    "80020000013a000000008000000000000123005a0023000b0003047200000006008000430010000300100020640f25c3331d5d955a24d3a804"
    "f30e8348e4323ccdd8fb276c47d91bbc82b03500204363dda0776af7178279f4f66b406a37fe35869de4b5d26c53b4ebdc6f7f6a7400370000"
    "00000020e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85501001000044000000700044000000700000020536f"
    "af9a58427b7d66ba9098f6c76a489bd6540e5b2cee2ceda1e3f49b4b2d6f802140000007004041029fe5688df6aeaccfd5529795173606f6c0"
    "4ab30093b0e1225d739bdf5911add1c0fba2709e29856f523da1ef9128ee9943a11050229ac8d157843fbf047c0022000b986fc4b28b6e9c64"
    "eac6065695d6f1076faef0e116e17d613c939bc17e73a84d0000010000";
constexpr std::string_view kOutPublic =
    "0023000b0003047200000006008000430010000300100020640f25c3331d5d955a24d3a804f30e8348e4323ccdd8fb276c47d91bbc82b035"
    "00204363dda0776af7178279f4f66b406a37fe35869de4b5d26c53b4ebdc6f7f6a74";
constexpr std::string_view kNullKeyName = "000b986fc4b28b6e9c64eac6065695d6f1076faef0e116e17d613c939bc17e73a84d";

// Step 1: StartAuthSession, salted with the null key, AES-128-CFB, no sessions.
constexpr std::string_view kStartAuthSessionCommand =
    "80010000008300000176800000004000000700201111111111111111111111111111111111111111111111111111111111111111004400205"
    "44e4be9da6b7060a90307ed83cad6a9b45502f9e400bf0c3cb99f9a1dbe733b0020f1186daa24d1e57d0dc7b6700d2693068c6a5cef84c57f"
    "a7cbe5c04950b024f300000600800043000b";
constexpr std::string_view kEphemeralX = "544e4be9da6b7060a90307ed83cad6a9b45502f9e400bf0c3cb99f9a1dbe733b";
constexpr std::string_view kEphemeralY = "f1186daa24d1e57d0dc7b6700d2693068c6a5cef84c57fa7cbe5c04950b024f3";
constexpr std::string_view kStartAuthSessionResponse =
    "80010000003000000000020000000020bbc1876f2c3f46cb78f5301afda6ddefdb9171d10c20d9060f3eb63b9cb1da3b";

// Step 2: GetRandom(16) with an encrypt session (parameters are ciphertext).
constexpr std::string_view kGetRandomResponse =
    "80020000006500000000000000120010f3433026c0e66f9a9390e19b88703f880020195eac421764ed88204931c9f9c02fa95a12d7c2e65b43"
    "6c675dda828adb348a410020b2ce7c039c31da08ca1de8b6a5d8b9180201671010272be77f082956e0c19ce1";

// Step 3: Create(sealed) with decrypt: command parameters after the session
// area, and the response.
constexpr std::string_view kCreateParams =
    "001c7841b9b6a44987a0553c352825e121eeb59e98ca19f318b66a3315c8000e0008000b00000452000000100000000000000000";
constexpr std::string_view kCreateFirstParamPlain = "00067365616c70770012676f6c64656e207365637265742031323334";
constexpr std::string_view kCreateFirstParamCipher = "7841b9b6a44987a0553c352825e121eeb59e98ca19f318b66a3315c8";
constexpr std::string_view kCreateResponse =
    "8002000001f400000000000001a10090002049e6200869fcd8f076e4e755ab551101110ec5130af2808117bc1dc06f32f5150010525b59edbd"
    "0c87131ff9f607995e772afec520b74adbcfeca2a39854751d79f5c84ed30102445439c4e537ad9cd13aea5dd1138e1230dbe4cd22d16be329"
    "4b6ab4e86bb660d49937bf8c16f1baf712d9243933a70459ff4f2973014eb32b2cda675a5c698818bc63adc074a6002e0008000b0000045200"
    "00001000202ad2abceb6994c86cc0c2ed710424f04b549e6137af190f1c0c6834f127ca4e10073000000000020e3b0c44298fc1c149afbf4c8"
    "996fb92427ae41e4649b934ca495991b7852b85501000b0022000b986fc4b28b6e9c64eac6065695d6f1076faef0e116e17d613c939bc17e73"
    "a84d0022000bc2ccd7ac281f0166b6ece54346a9f651c217e74c6e8dba051a933578fdaccd62000000200e6553c304a1b3c36184b490b25b25"
    "b679e0b532b846ac102454538e93de881880214000000700400998b460cca9e2f3f6e783ffe165f21853bf656c6834b47f29aaff0f45255bea"
    "77773fbb9f307fbb702434c7149f65c3f6fb98990cefa3ba418860c6d3c8818900203fe957725fc1564bb8c78177e630e4132cb63d78b10fe6"
    "43daa0645b91ec743d210020ac025322a8cac4aa1082e178e94879911a025756e660bc7fe83e7a0662d0eba9";

// Step 4: Load(sealed): command parameters after the session area, and the response.
constexpr std::string_view kSealedPrivate =
    "002049e6200869fcd8f076e4e755ab551101110ec5130af2808117bc1dc06f32f5150010525b59edbd0c87131ff9f607995e772afec520b74a"
    "dbcfeca2a39854751d79f5c84ed30102445439c4e537ad9cd13aea5dd1138e1230dbe4cd22d16be3294b6ab4e86bb660d49937bf8c16f1baf7"
    "12d9243933a70459ff4f2973014eb32b2cda675a5c698818bc63adc074a6";
constexpr std::string_view kSealedPublic =
    "0008000b000004520000001000202ad2abceb6994c86cc0c2ed710424f04b549e6137af190f1c0c6834f127ca4e1";
constexpr std::string_view kLoadResponse =
    "80020000007b0000000080000001000000240022000b780901248c17a71536c11e8334363cc19bbb0b04cf3e70291a86cb45840852cb0020fd"
    "9f0aa2003b550bdad38a36a7aa73aef38920466c4847c1632a19c2ae046809010020ba7d87eb8f5cdb0302c59ea73ea44afb772d32ebab2578"
    "d00ae13780c7d0c62f";

// Step 5: Unseal with encrypt (outData is ciphertext).
constexpr std::string_view kUnsealResponse =
    "800200000067000000000000001400126a6f59b783ae556f3da556573d35ba125c5700204f0e02d2b2f9899d6746d14403d40fb66e0edcccca"
    "a1eb784698718bf8a26bf241002031c939f819f4cfd8f868bb3cd2636d69e58687107a3a65f0df6288e066cb96c0";

// Step 6 / 7: ContextSave and ContextLoad of the session 0x02000000.
constexpr std::string_view kContextBody =
    "00000000000000790200000040000007018200408024abfcb1255e1ec9de9910f7a3ed4fd2b1b3c71c3b434ddd38b04b3fd97f9da837e88fdd"
    "7a3b"
    "f61d3d6317603770ef83775dad1f275da585de77a7465ff609f32d0368e3a806dc686a1a0bf8eb16cd13116d356af79116013b284da5862132"
    "ee"
    "da20cb582d621be543b7817d8a6d1c6016da9d88ff1073929e765d4247da086433b115e9e61ddfc27cee589481356d7e0e686b9444516b8ac8"
    "d7"
    "f8e2016e2c5f41b6f6dac155c94aa81b05cd83343a6ce7b79e309762403c764c8a38ba0670f792ae1cbddc54bb13ecefbd39d93d7174659fbe"
    "81"
    "401b6b945ff7dee1cbefd85da7a29d3698f57de09168aff5b172d401a5385d8665f17cdddd078aea9debe48f6b202ab80d0cc91356b7cc2ca0"
    "6b5"
    "3454ca4890b89e55b31ece0da63d439b1c5e0850a47f2627e7e7bd535a2fa1fa827b7d56d93302b0b968f93a920db1104172dc29c7fe83d0bf"
    "66"
    "c4ac92db9fb4b085b9bb72ae5e8314dd30af47c794afceef10878188b05b8f80c21f9ece3c4df29137dd5002e967efdc290e033c46001";
constexpr std::string_view kContextSaveCommand = "80010000000e0000016202000000";
constexpr std::string_view kContextSaveHeader = "80010000019e00000000";
constexpr std::string_view kContextLoadHeader = "80010000019e00000161";
constexpr std::string_view kContextLoadResponse = "80010000000e0000000002000000";

// ---------------------------------------------------------------------------
// Splitting commands and responses (test-local, independent of tpm.cc).

struct SplitCommand {
  uint16_t tag = 0;
  uint32_t size = 0;
  uint32_t code = 0;
  std::vector<uint32_t> handles;
  Bytes auth_area;
  Bytes params;
};

SplitCommand split_command(ByteView cmd, int handle_count) {
  SplitCommand s;
  Reader r(cmd);
  s.tag = r.u16("tag");
  s.size = r.u32("size");
  s.code = r.u32("code");
  for (int i = 0; i < handle_count; ++i) s.handles.push_back(r.u32("handle"));
  if (s.tag == st::kSessions) {
    uint32_t n = r.u32("authorizationSize");
    ByteView a = r.bytes(n, "auth area");
    s.auth_area.assign(a.begin(), a.end());
  }
  ByteView p = r.rest();
  s.params.assign(p.begin(), p.end());
  EXPECT_TRUE(r.ok());
  return s;
}

struct SplitResponse {
  uint16_t tag = 0;
  uint32_t size = 0;
  uint32_t code = 0;
  std::vector<uint32_t> handles;
  Bytes params;
  Bytes auth_area;
};

SplitResponse split_response(ByteView rsp, int handle_count) {
  SplitResponse s;
  Reader r(rsp);
  s.tag = r.u16("tag");
  s.size = r.u32("size");
  s.code = r.u32("code");
  EXPECT_EQ(s.size, rsp.size());
  EXPECT_EQ(s.code, 0u);
  for (int i = 0; i < handle_count; ++i) s.handles.push_back(r.u32("handle"));
  ByteView p;
  if (s.tag == st::kSessions) {
    uint32_t n = r.u32("parameterSize");
    p = r.bytes(n, "parameters");
  } else {
    p = r.rest();
  }
  s.params.assign(p.begin(), p.end());
  ByteView a = r.rest();
  s.auth_area.assign(a.begin(), a.end());
  EXPECT_TRUE(r.ok());
  return s;
}

// Parses a response parameter area the way Tpm::run does.
template <class C>
Result<typename C::Response> parse_params(ByteView params) {
  typename C::Response resp;
  Reader r(params);
  unmarshal_all(r, resp.params());
  r.expect_end(C::kInfo.name);
  if (!r.ok()) return r.status().error();
  return resp;
}

// Every strict prefix and every one-byte extension of `params` must fail.
template <class C>
void expect_params_strict(const Bytes& params) {
  for (size_t n = 0; n < params.size(); ++n) {
    EXPECT_FALSE(parse_params<C>(ByteView(params).first(n)).ok()) << C::kInfo.name << " prefix " << n;
  }
  Bytes longer = concat({params, H("00")});
  auto r = parse_params<C>(longer);
  ASSERT_FALSE(r.ok()) << C::kInfo.name;
  EXPECT_NE(r.error().message().find(C::kInfo.name), std::string::npos) << r.error().message();
}

Public null_template() {
  Public p;
  p.type = alg::kEcc;
  p.name_alg = alg::kSha256;
  p.attributes = 0x00030472;
  p.symmetric = SymDef::aes128_cfb();
  p.curve = curve::kNistP256;
  return p;
}

Public sealed_template() {
  Public p;
  p.type = alg::kKeyedHash;
  p.name_alg = alg::kSha256;
  p.attributes = 0x00000452;
  return p;
}

// ---------------------------------------------------------------------------
// Command parameters.

TEST(CommandParams, Startup) {
  cmd::Startup c;
  EXPECT_EQ(to_hex(params_of(c)), "0000");
  c.startup_type = su::kState;
  EXPECT_EQ(to_hex(params_of(c)), "0001");
}

TEST(CommandParams, Shutdown) {
  cmd::Shutdown c;
  EXPECT_EQ(to_hex(params_of(c)), "0000");
  c.shutdown_type = su::kState;
  EXPECT_EQ(to_hex(params_of(c)), "0001");
}

TEST(CommandParams, GetCapability) {
  cmd::GetCapability c;
  c.capability = cap::kTpmProperties;
  c.property = pt::kFixed;
  c.property_count = 64;
  EXPECT_EQ(to_hex(params_of(c)),
            "00000006"
            "00000100"
            "00000040");
}

TEST(CommandParams, GetRandom) {
  cmd::GetRandom c;
  c.bytes_requested = 16;
  EXPECT_EQ(to_hex(params_of(c)), "0010");
}

TEST(CommandParams, PcrRead) {
  cmd::PcrRead c;
  c.pcr_selection_in.banks = {PcrSelection::single(alg::kSha256, 16)};
  EXPECT_EQ(to_hex(params_of(c)),
            "00000001"
            "000b"
            "03"
            "000001");
}

TEST(CommandParams, PcrExtend) {
  cmd::PcrExtend c;
  c.pcr_handle = NamedHandle::of(16);
  c.digests.digests = {{alg::kSha256, Bytes(32, 0xab)}};
  EXPECT_EQ(to_hex(params_of(c)),
            "00000001"
            "000b"
            "abababababababababababababababababababababababababababababababab");
  EXPECT_EQ(c.pcr_handle.handle, 16u);
  EXPECT_EQ(to_hex(c.pcr_handle.name), "00000010");
}

TEST(CommandParams, PcrReset) {
  cmd::PcrReset c;
  c.pcr_handle = NamedHandle::of(23);
  EXPECT_TRUE(params_of(c).empty());
}

TEST(CommandParams, StartAuthSessionMatchesTranscript) {
  cmd::StartAuthSession c;
  c.tpm_key = {0x80000000, H(kNullKeyName)};
  c.nonce_caller.bytes = Bytes(32, 0x11);
  c.encrypted_salt.bytes = concat({H("0020"), H(kEphemeralX), H("0020"), H(kEphemeralY)});
  ASSERT_EQ(c.encrypted_salt.bytes.size(), 68u);
  c.session_type = se::kHmac;
  c.symmetric = SymDef::aes128_cfb();
  c.auth_hash = alg::kSha256;
  Bytes p = params_of(c);
  // Hand-written layout: nonce, salt, type, symmetric, authHash.
  EXPECT_EQ(to_hex(ByteView(p).first(34)), "0020" + std::string(64, '1'));
  EXPECT_EQ(to_hex(ByteView(p).subspan(34, 2)), "0044");
  EXPECT_EQ(to_hex(ByteView(p).last(9)),
            "00"
            "000600800043"
            "000b");
  EXPECT_EQ(p.size(), 34u + 70u + 9u);
  // And the recorded command.
  SplitCommand s = split_command(H(kStartAuthSessionCommand), 2);
  EXPECT_EQ(s.tag, st::kNoSessions);
  EXPECT_EQ(s.code, cc::kStartAuthSession);
  EXPECT_EQ(s.handles, (std::vector<uint32_t>{0x80000000, rh::kNull}));
  EXPECT_EQ(to_hex(p), to_hex(s.params));
  // Defaults: unbound, unsalted by handle (TPM_RH_NULL for both).
  cmd::StartAuthSession d;
  EXPECT_EQ(d.tpm_key.handle, rh::kNull);
  EXPECT_EQ(d.bind.handle, rh::kNull);
  EXPECT_EQ(to_hex(params_of(d)),
            "0000"
            "0000"
            "00"
            "0010"
            "000b");
}

TEST(CommandParams, ContextSave) {
  cmd::ContextSave c;
  c.save_handle = NamedHandle::of(0x02000000);
  EXPECT_TRUE(params_of(c).empty());
}

TEST(CommandParams, ContextLoadMatchesTranscript) {
  cmd::ContextLoad c;
  c.context.sequence = 0x79;
  c.context.saved_handle = 0x02000000;
  c.context.hierarchy = rh::kNull;
  Bytes body = H(kContextBody);
  c.context.blob.assign(body.begin() + 18, body.end());
  ASSERT_EQ(c.context.blob.size(), 386u);
  Bytes p = params_of(c);
  EXPECT_EQ(to_hex(ByteView(p).first(18)),
            "0000000000000079"
            "02000000"
            "40000007"
            "0182");
  EXPECT_EQ(to_hex(p), kContextBody);
  SplitCommand s = split_command(concat({H(kContextLoadHeader), H(kContextBody)}), 0);
  EXPECT_EQ(s.size, 10u + p.size());
  EXPECT_EQ(to_hex(s.params), to_hex(p));
}

TEST(CommandParams, FlushContext) {
  cmd::FlushContext c;
  c.flush_handle = 0x80000000;
  EXPECT_EQ(to_hex(params_of(c)), "80000000");
}

TEST(CommandParams, CreatePrimaryMatchesTranscript) {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_sensitive.user_auth = str("parentpw");
  c.in_public.public_area = null_template();
  Bytes p = params_of(c);
  EXPECT_EQ(to_hex(p),
            "000c"
            "0008706172656e747077"
            "0000"  // inSensitive
            "001a"
            "0023000b000304720000000600800043001000030010"
            "00000000"    // inPublic
            "0000"        // outsideInfo
            "00000000");  // creationPCR
  // The recorded command: header, handle, a 9-byte password session, params.
  SplitCommand s = split_command(H(kCreatePrimaryCommand), 1);
  EXPECT_EQ(s.tag, st::kSessions);
  EXPECT_EQ(s.size, H(kCreatePrimaryCommand).size());
  EXPECT_EQ(s.code, 0x131u);
  EXPECT_EQ(s.handles, std::vector<uint32_t>{rh::kNull});
  EXPECT_EQ(to_hex(s.auth_area),
            "40000009"
            "0000"
            "00"
            "0000");
  EXPECT_EQ(to_hex(s.params), to_hex(p));
}

TEST(CommandParams, CreateMatchesTranscriptUpToEncryption) {
  cmd::Create c;
  c.parent_handle = {0x80000000, H(kNullKeyName)};
  c.in_sensitive.user_auth = str("sealpw");
  c.in_sensitive.data = str("golden secret 1234");
  c.in_public.public_area = sealed_template();
  Bytes p = params_of(c);
  ASSERT_GT(p.size(), 30u);
  EXPECT_EQ(to_hex(ByteView(p).first(2)), "001c");
  EXPECT_EQ(to_hex(ByteView(p).subspan(2, 28)), kCreateFirstParamPlain);
  // The session encrypted the data bytes of the first parameter; the rest is as sent.
  Bytes cipher = H(kCreateFirstParamCipher);
  std::copy(cipher.begin(), cipher.end(), p.begin() + 2);
  EXPECT_EQ(to_hex(p), kCreateParams);
}

TEST(CommandParams, LoadMatchesTranscript) {
  cmd::Load c;
  c.parent_handle = {0x80000000, H(kNullKeyName)};
  c.in_private.bytes = H(kSealedPrivate);
  c.in_public.public_area = unmarshal_exact<Public>(H(kSealedPublic), "public").value();
  Bytes p = params_of(c);
  EXPECT_EQ(to_hex(p), "0090" + std::string(kSealedPrivate) + "002e" + std::string(kSealedPublic));
}

TEST(CommandParams, UnsealAndReadPublicHaveNone) {
  cmd::Unseal u;
  u.item_handle = {0x80000001, H("000b780901248c17a71536c11e8334363cc19bbb0b04cf3e70291a86cb45840852cb")};
  EXPECT_TRUE(params_of(u).empty());
  cmd::ReadPublic r;
  r.object_handle = NamedHandle::of(0x80000000);
  EXPECT_TRUE(params_of(r).empty());
}

TEST(CommandParams, Hash) {
  cmd::Hash c;
  c.data.bytes = str("abc");
  EXPECT_EQ(to_hex(params_of(c)),
            "0003616263"
            "000b"
            "40000007");
  c.hash_alg = alg::kSha1;
  c.hierarchy = rh::kOwner;
  c.data.bytes = {};
  EXPECT_EQ(to_hex(params_of(c)),
            "0000"
            "0004"
            "40000001");
}

TEST(CommandParams, NamedHandleOf) {
  NamedHandle h = NamedHandle::of(rh::kOwner);
  EXPECT_EQ(h.handle, rh::kOwner);
  EXPECT_EQ(to_hex(h.name), "40000001");
}

// ---------------------------------------------------------------------------
// Response parameters.

TEST(ResponseParams, CreatePrimaryFromTranscript) {
  SplitResponse s = split_response(H(kCreatePrimaryResponse), 1);
  EXPECT_EQ(s.tag, st::kSessions);
  EXPECT_EQ(s.handles, std::vector<uint32_t>{0x80000000});
  EXPECT_EQ(s.params.size(), 0x123u);
  EXPECT_EQ(to_hex(s.auth_area),
            "0000"
            "01"
            "0000");
  auto r = parse_params<cmd::CreatePrimary>(s.params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  const auto& resp = *r;
  EXPECT_EQ(to_hex(marshal_to_bytes(resp.out_public.public_area).value()), kOutPublic);
  EXPECT_EQ(resp.out_public.public_area.curve, curve::kNistP256);
  EXPECT_EQ(resp.out_public.public_area.unique_x.size(), 32u);
  EXPECT_EQ(resp.creation_data.bytes.size(), 0x37u);
  EXPECT_EQ(to_hex(resp.creation_hash.bytes), "536faf9a58427b7d66ba9098f6c76a489bd6540e5b2cee2ceda1e3f49b4b2d6f");
  EXPECT_EQ(resp.creation_ticket.tag, st::kCreation);
  EXPECT_EQ(resp.creation_ticket.hierarchy, rh::kNull);
  EXPECT_EQ(resp.creation_ticket.digest.size(), 64u);
  EXPECT_EQ(to_hex(resp.name.bytes), kNullKeyName);
  expect_params_strict<cmd::CreatePrimary>(s.params);
}

TEST(ResponseParams, CreateFromTranscript) {
  SplitResponse s = split_response(H(kCreateResponse), 0);
  auto r = parse_params<cmd::Create>(s.params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(r->out_private.bytes), kSealedPrivate);
  EXPECT_EQ(to_hex(marshal_to_bytes(r->out_public.public_area).value()), kSealedPublic);
  EXPECT_EQ(r->creation_data.bytes.size(), 0x73u);
  EXPECT_EQ(r->creation_hash.bytes.size(), 32u);
  EXPECT_EQ(r->creation_ticket.tag, st::kCreation);
  EXPECT_EQ(r->creation_ticket.hierarchy, rh::kNull);
  expect_params_strict<cmd::Create>(s.params);
}

TEST(ResponseParams, LoadFromTranscript) {
  SplitResponse s = split_response(H(kLoadResponse), 1);
  EXPECT_EQ(s.handles, std::vector<uint32_t>{0x80000001});
  auto r = parse_params<cmd::Load>(s.params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(r->name.bytes), "000b780901248c17a71536c11e8334363cc19bbb0b04cf3e70291a86cb45840852cb");
  expect_params_strict<cmd::Load>(s.params);
}

TEST(ResponseParams, UnsealFromTranscript) {
  SplitResponse s = split_response(H(kUnsealResponse), 0);
  auto r = parse_params<cmd::Unseal>(s.params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(r->out_data.bytes), "6a6f59b783ae556f3da556573d35ba125c57");
  expect_params_strict<cmd::Unseal>(s.params);
}

TEST(ResponseParams, GetRandomFromTranscript) {
  SplitResponse s = split_response(H(kGetRandomResponse), 0);
  auto r = parse_params<cmd::GetRandom>(s.params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(r->random_bytes.bytes), "f3433026c0e66f9a9390e19b88703f88");
  expect_params_strict<cmd::GetRandom>(s.params);
  EXPECT_FALSE(parse_params<cmd::GetRandom>(concat({H("0041"), Bytes(65, 0)})).ok()) << "TPM2B_DIGEST max 64";
}

TEST(ResponseParams, StartAuthSessionFromTranscript) {
  SplitResponse s = split_response(H(kStartAuthSessionResponse), 1);
  EXPECT_EQ(s.tag, st::kNoSessions);
  EXPECT_EQ(s.handles, std::vector<uint32_t>{0x02000000});
  auto r = parse_params<cmd::StartAuthSession>(s.params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(r->nonce_tpm.bytes), "bbc1876f2c3f46cb78f5301afda6ddefdb9171d10c20d9060f3eb63b9cb1da3b");
  expect_params_strict<cmd::StartAuthSession>(s.params);
}

TEST(ResponseParams, ContextSaveFromTranscript) {
  SplitResponse s = split_response(concat({H(kContextSaveHeader), H(kContextBody)}), 0);
  auto r = parse_params<cmd::ContextSave>(s.params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->context.sequence, 121u);
  EXPECT_EQ(r->context.saved_handle, 0x02000000u);
  EXPECT_EQ(r->context.hierarchy, rh::kNull);
  EXPECT_EQ(r->context.blob.size(), 386u);
  expect_params_strict<cmd::ContextSave>(s.params);
}

TEST(ResponseParams, ContextLoadFromTranscript) {
  SplitResponse s = split_response(H(kContextLoadResponse), 1);
  EXPECT_EQ(s.handles, std::vector<uint32_t>{0x02000000});
  EXPECT_TRUE(s.params.empty());
  auto r = parse_params<cmd::ContextLoad>(s.params);
  ASSERT_TRUE(r.ok());
  expect_params_strict<cmd::ContextLoad>(s.params);
}

TEST(ResponseParams, PcrRead) {
  Bytes params =
      H("00000005"  // pcrUpdateCounter
        "00000001"
        "000b03000001"  // pcrSelectionOut: sha256 PCR 16
        "00000001"
        "0020"  // pcrValues: one 32-byte digest
        "0000000000000000000000000000000000000000000000000000000000000000");
  auto r = parse_params<cmd::PcrRead>(params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->pcr_update_counter, 5u);
  ASSERT_EQ(r->pcr_selection_out.banks.size(), 1u);
  EXPECT_EQ(r->pcr_selection_out.banks[0], PcrSelection::single(alg::kSha256, 16));
  ASSERT_EQ(r->pcr_values.digests.size(), 1u);
  EXPECT_EQ(r->pcr_values.digests[0], Bytes(32, 0));
  expect_params_strict<cmd::PcrRead>(params);
}

TEST(ResponseParams, GetCapabilityProperties) {
  Bytes params =
      H("01"        // moreData
        "00000006"  // TPM_CAP_TPM_PROPERTIES
        "00000002"  // count
        "00000100"
        "322e3000"  // TPM_PT_FAMILY_INDICATOR "2.0"
        "00000105"
        "49424d00"  // TPM_PT_MANUFACTURER "IBM"
      );
  auto r = parse_params<cmd::GetCapability>(params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->more_data, 1);
  EXPECT_EQ(r->capability_data.capability, cap::kTpmProperties);
  ASSERT_EQ(r->capability_data.properties.size(), 2u);
  EXPECT_EQ(r->capability_data.properties[1].property, pt::kManufacturer);
  EXPECT_EQ(r->capability_data.properties[1].value, 0x49424d00u);
  expect_params_strict<cmd::GetCapability>(params);
}

TEST(ResponseParams, GetCapabilityPcrs) {
  Bytes params =
      H("00"
        "00000005"
        "00000002"
        "000403ffffff"
        "000b03ffffff");
  auto r = parse_params<cmd::GetCapability>(params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->capability_data.pcrs.banks.size(), 2u);
  EXPECT_TRUE(r->capability_data.pcrs.banks[1].has(23));
  expect_params_strict<cmd::GetCapability>(params);
}

TEST(ResponseParams, ReadPublic) {
  Bytes params = concat({H("005a"), H(kOutPublic), H("0022"), H(kNullKeyName), H("0022"), H(kNullKeyName)});
  auto r = parse_params<cmd::ReadPublic>(params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(r->name.bytes), kNullKeyName);
  EXPECT_EQ(r->out_public.public_area.type, alg::kEcc);
  expect_params_strict<cmd::ReadPublic>(params);
}

// An EK certificate index as swtpm_setup defines it (Part 2 §13.5): the
// index, SHA-256, PPWRITE|WRITEDEFINE|PPREAD|OWNERREAD|AUTHREAD|NO_DA|
// WRITTEN|PLATFORMCREATE, no policy, 0x0300 bytes; then its name.
TEST(ResponseParams, NvReadPublic) {
  Bytes params =
      H("000e"
        "01c00002"
        "000b"
        "620f2004"
        "0000"
        "0300"
        "0022"
        "000b"
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
  auto r = parse_params<cmd::NvReadPublic>(params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  const NvPublic& p = r->nv_public.nv_public;
  EXPECT_EQ(p.nv_index, 0x01c00002u);
  EXPECT_EQ(p.name_alg, alg::kSha256);
  EXPECT_TRUE(p.attributes & nv_attr::kAuthRead);
  EXPECT_TRUE(p.attributes & nv_attr::kWritten);
  EXPECT_EQ(p.data_size, 0x300u);
  expect_params_strict<cmd::NvReadPublic>(params);
  // A TPM2B_NV_PUBLIC whose size disagrees with its body is refused.
  EXPECT_FALSE(parse_params<cmd::NvReadPublic>(H("000f"
                                                 "01c00002"
                                                 "000b"
                                                 "620f2004"
                                                 "0000"
                                                 "0300"
                                                 "00"
                                                 "0000"))
                   .ok());
}

TEST(ResponseParams, NvReadIsBounded) {
  auto ok =
      parse_params<cmd::NvRead>(H("0003"
                                  "308203"));
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(to_hex(ok->data.bytes), "308203");
  // More than MAX_NV_BUFFER_SIZE (1024) bytes is refused before it is read.
  Bytes big = H("0401");
  big.resize(2 + 0x401, 0);
  EXPECT_FALSE(parse_params<cmd::NvRead>(big).ok());
}

TEST(ResponseParams, Hash) {
  Bytes params =
      H("0020"
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        "8024"
        "40000007"
        "0000");
  auto r = parse_params<cmd::Hash>(params);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(r->out_hash.bytes), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(r->validation.tag, st::kHashcheck);
  EXPECT_EQ(r->validation.hierarchy, rh::kNull);
  EXPECT_TRUE(r->validation.digest.empty());
  expect_params_strict<cmd::Hash>(params);
}

TEST(ResponseParams, EmptyParameterAreas) {
  expect_params_strict<cmd::Startup>({});
  expect_params_strict<cmd::Shutdown>({});
  expect_params_strict<cmd::PcrExtend>({});
  expect_params_strict<cmd::PcrReset>({});
  expect_params_strict<cmd::FlushContext>({});
  EXPECT_TRUE(parse_params<cmd::PcrExtend>({}).ok());
}

// ---------------------------------------------------------------------------
// End to end through Tpm::run with a transport that replays recorded bytes:
// the whole command must match what libtpms accepted.

// A scripted transport (testing/transport_doubles.h) answering with the
// recorded response. The handle ledger's listings (its baseline before the
// first creating command) are answered as a TPM holding no handles would,
// and not recorded.
struct Replay {
  explicit Replay(Bytes response) {
    transport.respond_with([this, response = std::move(response)](ByteView command) -> Result<Bytes> {
      if (testing::is_handle_listing(command)) {
        ++listings;
        return testing::empty_handle_listing();
      }
      sent.assign(command.begin(), command.end());
      return response;
    });
  }
  Replay(const Replay&) = delete;
  Replay& operator=(const Replay&) = delete;

  testing::ScriptedTransport transport{"replay"};
  Bytes sent;  // the last command that was not a listing
  size_t listings = 0;
};

TEST(Replay, StartAuthSession) {
  Replay t(H(kStartAuthSessionResponse));
  Tpm tpm(t.transport);
  cmd::StartAuthSession c;
  c.tpm_key = {0x80000000, H(kNullKeyName)};
  c.nonce_caller.bytes = Bytes(32, 0x11);
  c.encrypted_salt.bytes = concat({H("0020"), H(kEphemeralX), H("0020"), H(kEphemeralY)});
  c.symmetric = SymDef::aes128_cfb();
  auto r = tpm.run(c);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(to_hex(t.sent), kStartAuthSessionCommand);
  EXPECT_EQ(r->session_handle, 0x02000000u);
  EXPECT_EQ(r->nonce_tpm.bytes.size(), 32u);
  // The first creating command took the baseline (transient, loaded and
  // saved sessions), and the ledger owns the new session.
  EXPECT_EQ(t.listings, 3u);
  EXPECT_TRUE(tpm.ledger().owns(0x02000000u));
}

TEST(Replay, ContextSaveAndLoad) {
  Replay save_t(concat({H(kContextSaveHeader), H(kContextBody)}));
  Tpm save_tpm(save_t.transport);
  cmd::ContextSave save;
  save.save_handle = NamedHandle::of(0x02000000);
  auto saved = save_tpm.run(save);
  ASSERT_TRUE(saved.ok()) << saved.error().message();
  EXPECT_EQ(to_hex(save_t.sent), kContextSaveCommand);

  Replay load_t(H(kContextLoadResponse));
  Tpm load_tpm(load_t.transport);
  cmd::ContextLoad load;
  load.context = saved->context;
  auto loaded = load_tpm.run(load);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  EXPECT_EQ(to_hex(load_t.sent), std::string(kContextLoadHeader) + std::string(kContextBody));
  EXPECT_EQ(loaded->loaded_handle, 0x02000000u);
}

TEST(Replay, CreatePrimaryWithPasswordSession) {
  Replay t(H(kCreatePrimaryResponse));
  Tpm tpm(t.transport);
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_sensitive.user_auth = str("parentpw");
  c.in_public.public_area = null_template();
  auto r = tpm.run(c, {Auth::password()});
  ASSERT_TRUE(r.ok()) << r.error().message();
  // tpmsec's password session sets continueSession (01); the recording used 00.
  Bytes expected = H(kCreatePrimaryCommand);
  ASSERT_EQ(expected[10 + 4 + 4 + 6], 0x00);
  expected[10 + 4 + 4 + 6] = attr::kContinueSession;
  EXPECT_EQ(to_hex(t.sent), to_hex(expected));
  EXPECT_EQ(r->object_handle, 0x80000000u);
  EXPECT_EQ(to_hex(r->name.bytes), kNullKeyName);
  EXPECT_EQ(to_hex(marshal_to_bytes(r->out_public.public_area).value()), kOutPublic);
}

TEST(Replay, CreatePrimaryNeedsItsAuthorization) {
  Replay t(H(kCreatePrimaryResponse));
  Tpm tpm(t.transport);
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  auto r = tpm.run(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kUsage);
  EXPECT_TRUE(t.sent.empty()) << "nothing may be sent without the required session";
}

// ---------------------------------------------------------------------------
// kInfo against Part 3 (and the reference implementation's command attributes).

struct Part3 {
  uint32_t code;
  std::string_view name;
  uint8_t handles;
  uint8_t auths;
  uint8_t response_handles;
  bool decrypt;  // DECRYPT_2: first command parameter is a TPM2B
  bool encrypt;  // ENCRYPT_2: first response parameter is a TPM2B
};

template <class T>
struct IsTpm2b : std::false_type {};
template <size_t N>
struct IsTpm2b<Sized<N>> : std::true_type {};
template <>
struct IsTpm2b<PublicArea> : std::true_type {};
template <>
struct IsTpm2b<SensitiveCreate> : std::true_type {};
template <>
struct IsTpm2b<NvPublicArea> : std::true_type {};

template <class Tuple>
constexpr bool first_is_tpm2b() {
  if constexpr (std::tuple_size_v<Tuple> == 0) {
    return false;
  } else {
    return IsTpm2b<std::remove_cvref_t<std::tuple_element_t<0, Tuple>>>::value;
  }
}

struct InfoCheck {
  std::string name;
  CommandInfo info;
  Part3 spec;
  size_t handle_tuple;
  size_t response_handle_tuple;
  bool first_param_tpm2b;
  bool first_response_param_tpm2b;
};

template <class C>
InfoCheck check_of(Part3 spec) {
  C c{};
  typename C::Response resp{};
  return {std::string(C::kInfo.name),
          C::kInfo,
          spec,
          std::tuple_size_v<decltype(c.handles())>,
          std::tuple_size_v<decltype(resp.handles())>,
          first_is_tpm2b<decltype(c.params())>(),
          first_is_tpm2b<decltype(resp.params())>()};
}

// Part 3 tables and CommandAttributeData.h of the TCG reference code.
std::vector<InfoCheck> typed_commands() {
  return {
      check_of<cmd::Startup>({0x144, "Startup", 0, 0, 0, false, false}),
      check_of<cmd::Shutdown>({0x145, "Shutdown", 0, 0, 0, false, false}),
      check_of<cmd::GetCapability>({0x17A, "GetCapability", 0, 0, 0, false, false}),
      check_of<cmd::GetRandom>({0x17B, "GetRandom", 0, 0, 0, false, true}),
      check_of<cmd::PcrRead>({0x17E, "PCR_Read", 0, 0, 0, false, false}),
      check_of<cmd::PcrExtend>({0x182, "PCR_Extend", 1, 1, 0, false, false}),
      check_of<cmd::PcrReset>({0x13D, "PCR_Reset", 1, 1, 0, false, false}),
      check_of<cmd::CreatePrimary>({0x131, "CreatePrimary", 1, 1, 1, true, true}),
      check_of<cmd::Create>({0x153, "Create", 1, 1, 0, true, true}),
      check_of<cmd::Load>({0x157, "Load", 1, 1, 1, true, true}),
      check_of<cmd::Unseal>({0x15E, "Unseal", 1, 1, 0, false, true}),
      check_of<cmd::ReadPublic>({0x173, "ReadPublic", 1, 0, 0, false, true}),
      check_of<cmd::ContextSave>({0x162, "ContextSave", 1, 0, 0, false, false}),
      check_of<cmd::ContextLoad>({0x161, "ContextLoad", 0, 0, 1, false, false}),
      check_of<cmd::FlushContext>({0x165, "FlushContext", 0, 0, 0, false, false}),
      check_of<cmd::StartAuthSession>({0x176, "StartAuthSession", 2, 0, 1, true, true}),
      check_of<cmd::Hash>({0x17D, "Hash", 0, 0, 0, true, true}),
      check_of<cmd::NvReadPublic>({0x169, "NV_ReadPublic", 1, 0, 0, false, true}),
      check_of<cmd::NvRead>({0x14E, "NV_Read", 2, 1, 0, false, true}),
      check_of<cmd::EvictControl>({0x120, "EvictControl", 2, 1, 0, false, false}),
      check_of<cmd::NvDefineSpace>({0x12A, "NV_DefineSpace", 1, 1, 0, true, false}),
      check_of<cmd::NvUndefineSpace>({0x122, "NV_UndefineSpace", 2, 1, 0, false, false}),
  };
}

TEST(CommandInfo, MatchesPart3) {
  auto all = typed_commands();
  EXPECT_EQ(all.size(), 22u);
  for (const InfoCheck& c : all) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.info.code, c.spec.code);
    EXPECT_EQ(c.info.name, c.spec.name);
    EXPECT_EQ(c.info.handle_count, c.spec.handles);
    EXPECT_EQ(c.info.auth_count, c.spec.auths);
    EXPECT_LE(c.info.auth_count, c.info.handle_count);
    EXPECT_EQ(c.info.response_handle_count, c.spec.response_handles);
    EXPECT_EQ(c.info.command_param_tpm2b, c.spec.decrypt);
    EXPECT_EQ(c.info.response_param_tpm2b, c.spec.encrypt);
  }
}

TEST(CommandInfo, DefinitionsAreSelfConsistent) {
  for (const InfoCheck& c : typed_commands()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.handle_tuple, c.info.handle_count);
    EXPECT_EQ(c.response_handle_tuple, c.info.response_handle_count);
    EXPECT_EQ(c.first_param_tpm2b, c.spec.decrypt) << "first command parameter type";
    EXPECT_EQ(c.first_response_param_tpm2b, c.spec.encrypt) << "first response parameter type";
    // A flag may only be set when the parameter really is a TPM2B.
    if (c.info.command_param_tpm2b) {
      EXPECT_TRUE(c.first_param_tpm2b);
    }
    if (c.info.response_param_tpm2b) {
      EXPECT_TRUE(c.first_response_param_tpm2b);
    }
  }
}

// Every command in Part 3 whose response has a handle area returns a handle
// it created (an object, a session, a sequence) or, for ContextLoad, loaded:
// the handle ledger must see each of them.
TEST(CommandInfo, CommandsReturningAHandleCreateIt) {
  for (const InfoCheck& c : typed_commands()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.info.creates_handle, c.info.response_handle_count == 1);
  }
}

TEST(CommandInfo, CodesAreUnique) {
  auto all = typed_commands();
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) EXPECT_NE(all[i].info.code, all[j].info.code);
  }
}

// ---------------------------------------------------------------------------
// A command whose writer failed is refused before anything is sent: against
// the embedded TPM behind a FaultInjectingTransport, which counts every
// transmit() and passes each one through untouched.

class PreSend : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = open_embedded();
    ASSERT_TRUE(t.ok()) << t.error().message();
    embedded_ = std::move(*t);
    faults_ = std::make_unique<FaultInjectingTransport>(*embedded_);
    tpm_ = std::make_unique<Tpm>(*faults_);
    faults_->set_hook([this](size_t, uint32_t code, ByteView) {
      sent_codes_.push_back(code);
      return Fault::pass();
    });
  }
  void TearDown() override {
    tpm_.reset();
    faults_.reset();
    embedded_.reset();
  }
  size_t transmitted() const { return faults_->counters().commands; }
  // How many commands with `code` reached the transport (a creating command's
  // first run also lists the TPM's handles: the ledger's baseline).
  size_t transmitted(uint32_t code) const { return std::count(sent_codes_.begin(), sent_codes_.end(), code); }
  std::vector<uint32_t> sent_codes_;

  // `r` failed with kUsage, naming every one of `parts`, and nothing was sent.
  template <class R>
  void expect_refused_unsent(const R& r, std::initializer_list<std::string_view> parts) {
    ASSERT_FALSE(r.ok()) << "sent and answered";
    EXPECT_EQ(r.error().kind(), ErrorKind::kUsage) << r.error().message();
    for (std::string_view part : parts) {
      EXPECT_NE(r.error().message().find(part), std::string::npos) << "'" << part << "' not in " << r.error().message();
    }
    EXPECT_EQ(transmitted(), 0u) << "a refused command reached the transport";
  }

  std::unique_ptr<Transport> embedded_;
  std::unique_ptr<FaultInjectingTransport> faults_;
  std::unique_ptr<Tpm> tpm_;
};

TEST_F(PreSend, ParameterOverItsTpm2bMax) {
  cmd::Hash c;
  c.data.bytes = Bytes(1025, 0x61);  // TPM2B_MAX_BUFFER holds 1024
  expect_refused_unsent(tpm_->run(c), {"Hash parameters", "TPM2B at offset 0 has size 1025, at most 1024"});

  cmd::StartAuthSession s;
  s.nonce_caller.bytes = Bytes(32, 0x11);
  s.encrypted_salt.bytes = Bytes(513, 0x22);  // TPM2B_ENCRYPTED_SECRET holds 512
  expect_refused_unsent(tpm_->run(s), {"StartAuthSession parameters", "TPM2B at offset 34 has size 513, at most 512"});

  // At the max, the same command goes out and the TPM answers it.
  c.data.bytes.pop_back();
  auto ok = tpm_->run(c);
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(transmitted(), 1u);
  EXPECT_EQ(ok->out_hash.bytes.size(), 32u);
}

TEST_F(PreSend, DigestItsAlgorithmContradictsLeavesThePcrAlone) {
  auto before = pcr_read(*tpm_, alg::kSha256, 16);
  ASSERT_TRUE(before.ok()) << before.error().message();
  faults_->reset_counters();

  // TPMT_HA carries no size: 20 bytes under a sha256 tag would shift every
  // later byte. pcr_extend() checks the length itself; run() must too.
  cmd::PcrExtend c;
  c.pcr_handle = NamedHandle::of(16);
  c.digests.digests = {{alg::kSha256, Bytes(20, 0xee)}};
  expect_refused_unsent(tpm_->run(c, {Auth::password()}),
                        {"PCR_Extend parameters", "TPMT_HA.digest at offset 6 has size 20, sha256 needs 32"});

  auto after = pcr_read(*tpm_, alg::kSha256, 16);
  ASSERT_TRUE(after.ok()) << after.error().message();
  EXPECT_EQ(to_hex(*after), to_hex(*before));
}

TEST_F(PreSend, CommandOverTheCommandSizeLimit) {
  // A context blob within TPM2B_CONTEXT_DATA's 5120 bytes makes a command
  // longer than kMaxCommandBytes: 10 header + 18 TPMS_CONTEXT + 5120.
  cmd::ContextLoad c;
  c.context = {1, 0x80000000, rh::kNull, Bytes(5120, 0x33)};
  auto refused = tpm_->run(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind(), ErrorKind::kUsage) << refused.error().message();
  for (std::string_view part :
       {"ContextLoad: command would be 5148 bytes writing parameters at offset 10", "at most 4096 allowed"}) {
    EXPECT_NE(refused.error().message().find(part), std::string::npos) << refused.error().message();
  }
  EXPECT_EQ(transmitted(cc::kContextLoad), 0u) << "a refused command reached the transport";

  // Exactly 4096 bytes go out: the TPM sees the command (and refuses the bogus context).
  c.context.blob.resize(4096 - 10 - 18);
  auto r = tpm_->run(c);
  EXPECT_EQ(transmitted(cc::kContextLoad), 1u);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kTpm) << r.error().message();
  EXPECT_NE(r.error().tpm_rc(), 0x142u) << "TPM_RC_COMMAND_SIZE: the TPM took fewer than 4096 bytes";
}

TEST_F(PreSend, TheLimitIsNoMoreThanTheReferenceTpmAccepts) {
  cmd::GetCapability c{cap::kTpmProperties, pt::kMaxCommandSize, 1};
  auto r = tpm_->run(c);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_FALSE(r->capability_data.properties.empty());
  EXPECT_EQ(r->capability_data.properties[0].property, pt::kMaxCommandSize);
  EXPECT_GE(r->capability_data.properties[0].value, kMaxCommandBytes);
}

TEST_F(PreSend, ARefusedCommandLeavesTheSessionUsable) {
  auto session = HmacSession::start(*tpm_, SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.error().message();
  auto before = pcr_read(*tpm_, alg::kSha256, 16);
  ASSERT_TRUE(before.ok()) << before.error().message();
  faults_->reset_counters();

  Auth auth{session->get(), {}};
  cmd::PcrExtend bad;
  bad.pcr_handle = NamedHandle::of(16);
  bad.digests.digests = {{alg::kSha256, Bytes(32, 0x01)}, {alg::kSha1, Bytes(32, 0x02)}};
  expect_refused_unsent(tpm_->run(bad, {auth}), {"sha1 needs 20"});

  // The next command on the same session verifies: nothing of the refused one
  // reached the TPM, and the session's nonces did not move.
  Bytes digest(32, 0x5c);
  Status st = pcr_extend(*tpm_, alg::kSha256, 16, digest, auth);
  ASSERT_TRUE(st.ok()) << st.error().message();
  EXPECT_EQ(transmitted(), 1u);
  EXPECT_TRUE((*session)->usable());
  auto after = pcr_read(*tpm_, alg::kSha256, 16);
  ASSERT_TRUE(after.ok()) << after.error().message();
  auto expected = pcr_extended_value(alg::kSha256, *before, digest);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(to_hex(*after), to_hex(*expected)) << "extended once, with the good digest only";
}

}  // namespace
}  // namespace tpmsec
