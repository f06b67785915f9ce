// Marshalling tests for every structure in structures.h: round trips against
// known bytes, then hostile input (truncation, lying sizes and counts, unknown
// algorithm ids, trailing bytes).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "support/test_data.h"
#include "tpmsec/bytes.h"
#include "tpmsec/constants.h"
#include "tpmsec/structures.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::H;

Bytes filled(size_t n, uint8_t start = 1) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(start + i);
  return b;
}

Bytes str(std::string_view s) { return Bytes(s.begin(), s.end()); }

void put16(Bytes& b, size_t at, uint16_t v) {
  b.at(at) = static_cast<uint8_t>(v >> 8);
  b.at(at + 1) = static_cast<uint8_t>(v);
}
void put32(Bytes& b, size_t at, uint32_t v) { store_be32(&b.at(at), v); }

// A value the test expects to marshal.
template <class T>
Bytes encode(const T& value) {
  auto r = marshal_to_bytes(value);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : Bytes{};
}

// Hostile encodings of values marshal refuses to write: start from a value at
// the bound and make the bytes lie.
// The TPM2B whose u16 size is at `size_at` gains one byte of body; every
// enclosing u16 size (at `outer`) grows with it.
Bytes grow_tpm2b(Bytes b, size_t size_at, std::initializer_list<size_t> outer = {}) {
  size_t n = size_t{b.at(size_at)} << 8 | b.at(size_at + 1);
  b.insert(b.begin() + static_cast<ptrdiff_t>(size_at + 2 + n), 0x5a);
  put16(b, size_at, static_cast<uint16_t>(n + 1));
  for (size_t at : outer) put16(b, at, static_cast<uint16_t>((b.at(at) << 8 | b.at(at + 1)) + 1));
  return b;
}
// The list whose u32 count is at `count_at` gains `element` at the end.
Bytes grow_list(Bytes b, size_t count_at, ByteView element) {
  put32(b, count_at, load_be32(&b.at(count_at)) + 1);
  b.insert(b.end(), element.begin(), element.end());
  return b;
}

// ---------------------------------------------------------------------------
// Known bytes.

// TCG "SRK ECC template H" as Linux sends it for the null primary
// (Linux drivers/char/tpm/tpm2-sessions.c, tpm2_create_null_primary).
constexpr std::string_view kNullTemplateHex =
    "0023000b000304720000000600800043001000030010"
    "00000000";

// outPublic of CreatePrimary(RH_NULL, ECC P-256) against libtpms
// (session-transcript-libtpms.json, step 0).
constexpr std::string_view kOutPublicHex =
    "0023000b0003047200000006008000430010000300100020640f25c3331d5d955a24d3a804f30e8348e4323ccdd8fb276c47d91bbc82b035"
    "00204363dda0776af7178279f4f66b406a37fe35869de4b5d26c53b4ebdc6f7f6a74";
constexpr std::string_view kPointXHex = "640f25c3331d5d955a24d3a804f30e8348e4323ccdd8fb276c47d91bbc82b035";
constexpr std::string_view kPointYHex = "4363dda0776af7178279f4f66b406a37fe35869de4b5d26c53b4ebdc6f7f6a74";

// inPublic of Load(sealed) in the transcript, step 4: a keyed-hash sealed
// data object (TPM2B_PUBLIC, size 0x2e).
constexpr std::string_view kSealedPublicAreaHex =
    "002e0008000b000004520000001000202ad2abceb6994c86cc0c2ed710424f04b549e6137af190f1c0c6834f127ca4e1";

// inSensitive of CreatePrimary in the transcript, step 0: userAuth "parentpw".
constexpr std::string_view kSensitiveCreateHex = "000c0008706172656e7470770000";

// creationTicket of the CreatePrimary response in the transcript, step 0.
constexpr std::string_view kCreationTicketHex =
    "8021400000070040"
    "41029fe5688df6aeaccfd5529795173606f6c04ab30093b0e1225d739bdf5911add1c0fba2709e29856f523da1ef9128ee9943a11050229ac8"
    "d157843fbf047c";

// TPMS_CONTEXT of ContextSave(session) in the transcript, step 6.
constexpr std::string_view kContextHex =
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

constexpr uint32_t kSrkAttributes = object_attr::kFixedTpm | object_attr::kFixedParent |
                                    object_attr::kSensitiveDataOrigin | object_attr::kUserWithAuth |
                                    object_attr::kNoDa | object_attr::kRestricted | object_attr::kDecrypt;

Public null_template() {
  Public p;
  p.type = alg::kEcc;
  p.name_alg = alg::kSha256;
  p.attributes = kSrkAttributes;
  p.symmetric = SymDef::aes128_cfb();
  p.scheme = {alg::kNull, 0, 0};
  p.curve = curve::kNistP256;
  p.kdf = {alg::kNull, 0, 0};
  return p;
}

Public ecc_with_point() {
  Public p = null_template();
  p.unique_x = H(kPointXHex);
  p.unique_y = H(kPointYHex);
  return p;
}

Public ecc_signing() {
  Public p;
  p.type = alg::kEcc;
  p.attributes = object_attr::kSign | object_attr::kUserWithAuth | object_attr::kSensitiveDataOrigin;
  p.auth_policy = filled(32, 0x40);
  p.symmetric = {};
  p.scheme = {alg::kEcdsa, alg::kSha256, 0};
  p.curve = curve::kNistP256;
  p.kdf = {0x0021 /* KDF1_SP800_56A */, alg::kSha256, 0};
  p.unique_x = filled(32, 0x10);
  p.unique_y = filled(32, 0x90);
  return p;
}

Public ecc_ecdaa() {
  Public p = ecc_signing();
  p.scheme = {0x001A /* ECDAA */, alg::kSha256, 7};
  p.curve = 0x0010;  // BN P256
  p.kdf = {};
  return p;
}

Public rsa2048() {
  Public p;
  p.type = alg::kRsa;
  p.name_alg = alg::kSha256;
  p.attributes = kSrkAttributes;
  p.symmetric = SymDef::aes128_cfb();
  p.scheme = {alg::kNull, 0, 0};
  p.key_bits = 2048;
  p.exponent = 0;
  p.unique_x = filled(256, 0x33);
  return p;
}

Public rsa_signing() {
  Public p = rsa2048();
  p.attributes = object_attr::kSign | object_attr::kUserWithAuth;
  p.symmetric = {};
  p.scheme = {alg::kRsassa, alg::kSha256, 0};
  p.exponent = 65537;
  return p;
}

Public rsa_oaep() {
  Public p = rsa2048();
  p.attributes = object_attr::kDecrypt | object_attr::kUserWithAuth;
  p.symmetric = {};
  p.scheme = {alg::kOaep, alg::kSha384, 0};
  return p;
}

Public rsa_rsaes() {
  Public p = rsa_oaep();
  p.scheme = {alg::kRsaes, 0, 0};
  return p;
}

Public sealed() {
  Public p;
  p.type = alg::kKeyedHash;
  p.name_alg = alg::kSha256;
  p.attributes = 0x00000452;  // fixedTPM | fixedParent | userWithAuth | noDA
  p.scheme = {alg::kNull, 0, 0};
  p.unique_x = H("2ad2abceb6994c86cc0c2ed710424f04b549e6137af190f1c0c6834f127ca4e1");
  return p;
}

Public hmac_key() {
  Public p = sealed();
  p.attributes = object_attr::kSign | object_attr::kUserWithAuth | object_attr::kSensitiveDataOrigin;
  p.scheme = {alg::kHmac, alg::kSha256, 0};
  p.unique_x = filled(32);
  return p;
}

Public keyed_xor() {
  Public p = sealed();
  p.attributes = object_attr::kDecrypt | object_attr::kUserWithAuth;
  p.scheme = {alg::kXor, alg::kSha256, 0x0022 /* KDF2 */};
  p.unique_x = {};
  return p;
}

Public symcipher() {
  Public p;
  p.type = alg::kSymCipher;
  p.name_alg = alg::kSha256;
  p.attributes = object_attr::kDecrypt | object_attr::kSign | object_attr::kUserWithAuth;
  p.symmetric = SymDef::aes128_cfb();
  p.unique_x = filled(32, 0xa0);
  return p;
}

// ---------------------------------------------------------------------------
// Type-erased vectors for the generic hostile-input tests.

struct Parsed {
  bool ok = false;
  size_t consumed = 0;
  std::string error;
};

struct Vector {
  std::string name;
  Bytes bytes;
  std::function<Parsed(ByteView)> parse;        // Reader-level unmarshal
  std::function<Parsed(ByteView)> parse_exact;  // unmarshal_exact
  std::function<Bytes(ByteView)> remarshal;     // parse, then marshal again
};

template <class T>
Vector make_vector(std::string name, Bytes bytes) {
  Vector v;
  v.name = std::move(name);
  v.bytes = std::move(bytes);
  v.parse = [](ByteView b) {
    Reader r(b);
    T value{};
    unmarshal(r, value);
    Parsed p;
    p.ok = r.ok();
    p.consumed = b.size() - r.remaining();
    if (!p.ok) p.error = r.status().error().message();
    return p;
  };
  v.parse_exact = [](ByteView b) {
    auto res = unmarshal_exact<T>(b, "vector");
    Parsed p;
    p.ok = res.ok();
    p.consumed = b.size();
    if (!p.ok) p.error = res.error().message();
    return p;
  };
  v.remarshal = [](ByteView b) {
    auto res = unmarshal_exact<T>(b, "vector");
    return res.ok() ? encode(*res) : Bytes{};
  };
  return v;
}

template <class T>
Vector make_vector(std::string name, const T& value) {
  return make_vector<T>(std::move(name), encode(value));
}

CapabilityData cap_algs() {
  CapabilityData c;
  c.capability = cap::kAlgs;
  c.algorithms = {{alg::kRsa, 0x9}, {alg::kSha256, 0x4}, {alg::kEcc, 0x9}};
  return c;
}
CapabilityData cap_handles() {
  CapabilityData c;
  c.capability = cap::kHandles;
  c.handles = {0x80000000, 0x80000001, 0x81000001};
  return c;
}
CapabilityData cap_commands() {
  CapabilityData c;
  c.capability = cap::kCommands;
  c.commands = {0x0000011f, 0x02000131, 0x0440015e};
  return c;
}
CapabilityData cap_pcrs() {
  CapabilityData c;
  c.capability = cap::kPcrs;
  c.pcrs.banks = {{alg::kSha1, H("ffffff")}, {alg::kSha256, H("ffffff")}, {alg::kSha384, H("000000")}};
  return c;
}
CapabilityData cap_properties() {
  CapabilityData c;
  c.capability = cap::kTpmProperties;
  c.properties = {{pt::kFamilyIndicator, 0x322e3000}, {pt::kManufacturer, 0x49424d00}, {pt::kInputBuffer, 1024}};
  return c;
}
CapabilityData cap_curves() {
  CapabilityData c;
  c.capability = cap::kEccCurves;
  c.curves = {curve::kNistP256, curve::kNistP384};
  return c;
}

std::vector<Vector> all_vectors() {
  std::vector<Vector> v;
  v.push_back(make_vector("PcrSelection", PcrSelection::single(alg::kSha256, 16)));
  v.push_back(make_vector("PcrSelection.empty", PcrSelection{alg::kSha1, {}}));
  v.push_back(make_vector("PcrSelectionList", PcrSelectionList{{PcrSelection::single(alg::kSha1, 0),
                                                                PcrSelection::single(alg::kSha256, 23)}}));
  v.push_back(make_vector("PcrSelectionList.empty", PcrSelectionList{}));
  v.push_back(make_vector("DigestList", DigestList{{filled(32), filled(20), {}}}));
  v.push_back(make_vector("TaggedHash.sha256", TaggedHash{alg::kSha256, filled(32)}));
  v.push_back(make_vector("TaggedHash.sha1", TaggedHash{alg::kSha1, filled(20)}));
  v.push_back(
      make_vector("DigestValues",
                  DigestValues{{{alg::kSha1, filled(20)}, {alg::kSha256, filled(32)}, {alg::kSha512, filled(64)}}}));
  v.push_back(make_vector("SymDef.aes128cfb", SymDef::aes128_cfb()));
  v.push_back(make_vector("SymDef.xor", SymDef::xor_with(alg::kSha256)));
  v.push_back(make_vector("SymDef.null", SymDef{}));
  v.push_back(make_vector<Public>("Public.null_template", H(kNullTemplateHex)));
  v.push_back(make_vector<Public>("Public.transcript_outPublic", H(kOutPublicHex)));
  v.push_back(make_vector("Public.ecc_signing", ecc_signing()));
  v.push_back(make_vector("Public.ecc_ecdaa", ecc_ecdaa()));
  v.push_back(make_vector("Public.rsa2048", rsa2048()));
  v.push_back(make_vector("Public.rsa_signing", rsa_signing()));
  v.push_back(make_vector("Public.rsa_oaep", rsa_oaep()));
  v.push_back(make_vector("Public.rsa_rsaes", rsa_rsaes()));
  v.push_back(make_vector("Public.sealed", sealed()));
  v.push_back(make_vector("Public.hmac_key", hmac_key()));
  v.push_back(make_vector("Public.keyed_xor", keyed_xor()));
  v.push_back(make_vector("Public.symcipher", symcipher()));
  v.push_back(make_vector<PublicArea>("PublicArea.transcript_sealed", H(kSealedPublicAreaHex)));
  v.push_back(make_vector("PublicArea.ecc", PublicArea{ecc_with_point()}));
  v.push_back(make_vector("PublicArea.rsa", PublicArea{rsa2048()}));
  v.push_back(make_vector<SensitiveCreate>("SensitiveCreate.transcript", H(kSensitiveCreateHex)));
  v.push_back(make_vector("SensitiveCreate.data", SensitiveCreate{filled(64), filled(128)}));
  v.push_back(make_vector("SensitiveCreate.empty", SensitiveCreate{}));
  v.push_back(make_vector<Ticket>("Ticket.creation", H(kCreationTicketHex)));
  v.push_back(make_vector("Ticket.hashcheck_null", Ticket{st::kHashcheck, rh::kNull, {}}));
  v.push_back(make_vector<Context>("Context.transcript", H(kContextHex)));
  v.push_back(make_vector("Context.small", Context{0x0102030405060708ull, 0x80000000, rh::kOwner, filled(16)}));
  v.push_back(make_vector("CapabilityData.algs", cap_algs()));
  v.push_back(make_vector("CapabilityData.handles", cap_handles()));
  v.push_back(make_vector("CapabilityData.commands", cap_commands()));
  v.push_back(make_vector("CapabilityData.pcrs", cap_pcrs()));
  v.push_back(make_vector("CapabilityData.properties", cap_properties()));
  v.push_back(make_vector("CapabilityData.curves", cap_curves()));
  v.push_back(make_vector("Tpm2bDigest", Tpm2bDigest{filled(32)}));
  v.push_back(make_vector("Tpm2bName", Tpm2bName{concat({H("000b"), filled(32)})}));
  v.push_back(make_vector("Tpm2bEncryptedSecret", Tpm2bEncryptedSecret{filled(68)}));
  v.push_back(make_vector("Tpm2bMaxBuffer", Tpm2bMaxBuffer{filled(3)}));
  v.push_back(make_vector("Tpm2bPrivate", Tpm2bPrivate{filled(144)}));
  v.push_back(make_vector("Tpm2bSensitiveData", Tpm2bSensitiveData{filled(18)}));
  v.push_back(make_vector("Tpm2bCreationData", Tpm2bCreationData{filled(55)}));
  v.push_back(make_vector("Tpm2bContextData", Tpm2bContextData{filled(386)}));
  return v;
}

// ---------------------------------------------------------------------------
// Round trips of known values.

template <class T>
void expect_round_trip(const T& value, std::string_view expected_hex = {}) {
  Bytes enc = encode(value);
  if (!expected_hex.empty()) {
    EXPECT_EQ(to_hex(enc), expected_hex);
  }
  auto back = unmarshal_exact<T>(enc, "round trip");
  ASSERT_TRUE(back.ok()) << back.error().message() << " for " << to_hex(enc);
  EXPECT_TRUE(*back == value) << to_hex(enc);
  EXPECT_EQ(to_hex(encode(*back)), to_hex(enc));
}

template <class T>
T parse_ok(std::string_view hex) {
  auto r = unmarshal_exact<T>(H(hex), "vector");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message());
  return r.ok() ? *r : T{};
}

TEST(RoundTrip, PcrSelection) {
  PcrSelection s = PcrSelection::single(alg::kSha256, 16);
  expect_round_trip(s, "000b03000001");
  EXPECT_TRUE(s.has(16));
  EXPECT_FALSE(s.has(15));
  EXPECT_FALSE(s.has(17));
  EXPECT_FALSE(s.has(200));
  expect_round_trip(PcrSelection::single(alg::kSha1, 0), "000403010000");
  expect_round_trip(PcrSelection::single(alg::kSha256, 31), "000b0400000080");
  expect_round_trip(PcrSelection{alg::kSha384, {}}, "000c00");
  expect_round_trip(PcrSelection{alg::kSha256, Bytes(32, 0xff)});  // sizeofSelect at the maximum
}

TEST(RoundTrip, PcrSelectionList) {
  expect_round_trip(PcrSelectionList{}, "00000000");
  expect_round_trip(PcrSelectionList{{PcrSelection::single(alg::kSha256, 16)}}, "00000001000b03000001");
  PcrSelectionList sixteen;
  for (int i = 0; i < 16; ++i) sixteen.banks.push_back(PcrSelection::single(alg::kSha256, i));
  expect_round_trip(sixteen);
}

TEST(RoundTrip, DigestList) {
  expect_round_trip(DigestList{}, "00000000");
  expect_round_trip(DigestList{{H("aabb"), {}}}, "000000020002aabb0000");
  expect_round_trip(DigestList{std::vector<Bytes>(8, filled(64))});
}

TEST(RoundTrip, TaggedHash) {
  expect_round_trip(TaggedHash{alg::kSha256, Bytes(32, 0x11)},
                    "000b1111111111111111111111111111111111111111111111111111111111111111");
  expect_round_trip(TaggedHash{alg::kSha1, filled(20)});
  expect_round_trip(TaggedHash{alg::kSha384, filled(48)});
  expect_round_trip(TaggedHash{alg::kSha512, filled(64)});
  expect_round_trip(TaggedHash{alg::kSm3_256, filled(32)});
}

TEST(RoundTrip, DigestValues) {
  expect_round_trip(DigestValues{}, "00000000");
  expect_round_trip(DigestValues{{{alg::kSha1, Bytes(20, 0)}}},
                    "000000010004"
                    "0000000000000000000000000000000000000000");
  DigestValues all;
  for (uint16_t h : {alg::kSha1, alg::kSha256, alg::kSha384, alg::kSha512, alg::kSm3_256}) {
    all.digests.push_back({h, filled(*digest_size(h))});
  }
  expect_round_trip(all);
}

TEST(RoundTrip, SymDef) {
  expect_round_trip(SymDef::aes128_cfb(), "000600800043");
  expect_round_trip(SymDef::xor_with(alg::kSha256), "000a000b");
  expect_round_trip(SymDef{}, "0010");
  expect_round_trip(SymDef{alg::kAes, 256, alg::kCfb}, "000601000043");
  expect_round_trip(SymDef{0x0026 /* CAMELLIA */, 128, alg::kCfb}, "002600800043");
  expect_round_trip(SymDef{0x0013 /* SM4 */, 128, alg::kCfb}, "001300800043");
}

TEST(RoundTrip, PublicNullTemplateExactBytes) {
  Public p = null_template();
  EXPECT_EQ(to_hex(encode(p)), kNullTemplateHex);
  expect_round_trip(p, kNullTemplateHex);
  Public parsed = parse_ok<Public>(kNullTemplateHex);
  EXPECT_EQ(parsed.attributes, 0x00030472u);
  EXPECT_EQ(parsed.symmetric, SymDef::aes128_cfb());
  EXPECT_TRUE(parsed.unique_x.empty());
  EXPECT_TRUE(parsed.unique_y.empty());
}

TEST(RoundTrip, PublicFromTranscriptCreatePrimary) {
  Public p = parse_ok<Public>(kOutPublicHex);
  EXPECT_EQ(p.type, alg::kEcc);
  EXPECT_EQ(p.name_alg, alg::kSha256);
  EXPECT_EQ(p.attributes, kSrkAttributes);
  EXPECT_TRUE(p.auth_policy.empty());
  EXPECT_EQ(p.symmetric, SymDef::aes128_cfb());
  EXPECT_EQ(p.scheme.scheme, alg::kNull);
  EXPECT_EQ(p.curve, curve::kNistP256);
  EXPECT_EQ(p.kdf.scheme, alg::kNull);
  EXPECT_EQ(to_hex(p.unique_x), kPointXHex);
  EXPECT_EQ(to_hex(p.unique_y), kPointYHex);
  EXPECT_EQ(p, ecc_with_point());
  expect_round_trip(ecc_with_point(), kOutPublicHex);
}

TEST(RoundTrip, PublicEccVariants) {
  expect_round_trip(ecc_signing());
  Bytes e = encode(ecc_signing());
  // type nameAlg attrs policy(32) | sym NULL | ECDSA sha256 | curve | KDF1_SP800_56A sha256
  EXPECT_EQ(to_hex(ByteView(e).subspan(42, 12)),
            "0010"
            "0018000b"
            "0003"
            "0021000b");
  expect_round_trip(ecc_ecdaa());
  Bytes d = encode(ecc_ecdaa());
  EXPECT_EQ(to_hex(ByteView(d).subspan(42, 12)),
            "0010"
            "001a000b0007"
            "0010"
            "0010");
  // P-521 sized coordinates are the maximum.
  Public p521 = ecc_with_point();
  p521.curve = 0x0005;
  p521.unique_x = filled(66);
  p521.unique_y = filled(66, 7);
  expect_round_trip(p521);
}

TEST(RoundTrip, PublicRsa2048) {
  Public p = rsa2048();
  Bytes enc = encode(p);
  EXPECT_EQ(to_hex(ByteView(enc).first(26)),
            "0001000b0003047200000006008000430010"
            "0800"
            "00000000"
            "0100");
  EXPECT_EQ(enc.size(), 26u + 256u);
  expect_round_trip(p);
  expect_round_trip(rsa_signing());
  Bytes s = encode(rsa_signing());
  EXPECT_EQ(to_hex(ByteView(s).subspan(10, 12)),
            "0010"
            "0014000b"
            "0800"
            "00010001");
  expect_round_trip(rsa_oaep());
  expect_round_trip(rsa_rsaes());
  Bytes es = encode(rsa_rsaes());
  EXPECT_EQ(to_hex(ByteView(es).subspan(10, 4)),
            "0010"
            "0015")
      << "RSAES has no scheme details";
  Public rsa4096 = rsa2048();
  rsa4096.key_bits = 4096;
  rsa4096.unique_x = filled(512);
  expect_round_trip(rsa4096);
}

TEST(RoundTrip, PublicKeyedHashSealed) {
  PublicArea area = parse_ok<PublicArea>(kSealedPublicAreaHex);
  EXPECT_EQ(area.public_area, sealed());
  expect_round_trip(PublicArea{sealed()}, kSealedPublicAreaHex);
  // The sealed-object template of Create in the transcript (step 3).
  Public tmpl = sealed();
  tmpl.unique_x = {};
  expect_round_trip(PublicArea{tmpl},
                    "000e0008000b000004520000001000"
                    "00");
  expect_round_trip(hmac_key());
  Bytes h = encode(hmac_key());
  EXPECT_EQ(to_hex(ByteView(h).subspan(10, 4)), "0005000b");
  expect_round_trip(keyed_xor());
  EXPECT_EQ(to_hex(encode(keyed_xor())),
            "0008000b000200400000"
            "000a000b0022"
            "0000");
}

TEST(RoundTrip, PublicSymCipher) {
  Public p = symcipher();
  Bytes enc = encode(p);
  EXPECT_EQ(to_hex(ByteView(enc).first(18)), "0025000b0006004000000006008000430020");
  expect_round_trip(p);
}

TEST(RoundTrip, PublicNullNameAlg) {
  Public p = sealed();
  p.name_alg = alg::kNull;
  expect_round_trip(p);
}

TEST(RoundTrip, PublicArea) {
  PublicArea a{null_template()};
  expect_round_trip(a, std::string("001a") + std::string(kNullTemplateHex));
  expect_round_trip(PublicArea{ecc_with_point()}, std::string("005a") + std::string(kOutPublicHex));
  expect_round_trip(PublicArea{rsa2048()});
  expect_round_trip(PublicArea{symcipher()});
}

TEST(RoundTrip, SensitiveCreate) {
  SensitiveCreate s{str("parentpw"), {}};
  expect_round_trip(s, kSensitiveCreateHex);
  expect_round_trip(SensitiveCreate{}, "000400000000");
  expect_round_trip(SensitiveCreate{H("0061620063640000"), str("zero-auth secret")});
  expect_round_trip(SensitiveCreate{filled(64), filled(256)});
}

TEST(RoundTrip, Ticket) {
  Ticket t = parse_ok<Ticket>(kCreationTicketHex);
  EXPECT_EQ(t.tag, st::kCreation);
  EXPECT_EQ(t.hierarchy, rh::kNull);
  EXPECT_EQ(t.digest.size(), 64u);
  expect_round_trip(t, kCreationTicketHex);
  expect_round_trip(Ticket{st::kHashcheck, rh::kNull, {}}, "8024400000070000");
  expect_round_trip(Ticket{st::kHashcheck, rh::kOwner, filled(32)});
}

TEST(RoundTrip, Context) {
  Context c = parse_ok<Context>(kContextHex);
  EXPECT_EQ(c.sequence, 121u);
  EXPECT_EQ(c.saved_handle, 0x02000000u);
  EXPECT_EQ(c.hierarchy, rh::kNull);
  EXPECT_EQ(c.blob.size(), 386u);
  expect_round_trip(c, kContextHex);
  expect_round_trip(Context{~0ull, 0x80000002, rh::kOwner, {}},
                    "ffffffffffffffff"
                    "80000002"
                    "40000001"
                    "0000");
  expect_round_trip(Context{1, 0x80000000, rh::kEndorsement, filled(5120)});
}

TEST(RoundTrip, CapabilityDataEveryKind) {
  expect_round_trip(cap_algs(),
                    "00000000"
                    "00000003"
                    "000100000009"
                    "000b00000004"
                    "002300000009");
  expect_round_trip(cap_handles(),
                    "00000001"
                    "00000003"
                    "80000000"
                    "80000001"
                    "81000001");
  expect_round_trip(cap_commands(),
                    "00000002"
                    "00000003"
                    "0000011f"
                    "02000131"
                    "0440015e");
  expect_round_trip(cap_pcrs(),
                    "00000005"
                    "00000003"
                    "000403ffffff"
                    "000b03ffffff"
                    "000c03000000");
  expect_round_trip(cap_properties(),
                    "00000006"
                    "00000003"
                    "00000100322e3000"
                    "0000010549424d00"
                    "0000010d00000400");
  expect_round_trip(cap_curves(),
                    "00000008"
                    "00000002"
                    "0003"
                    "0004");
  for (uint32_t kind : {cap::kAlgs, cap::kHandles, cap::kCommands, cap::kPcrs, cap::kTpmProperties, cap::kEccCurves}) {
    CapabilityData empty;
    empty.capability = kind;
    expect_round_trip(empty);
  }
}

TEST(RoundTrip, SizedBuffers) {
  expect_round_trip(Tpm2bDigest{}, "0000");
  expect_round_trip(Tpm2bDigest{filled(64)});
  expect_round_trip(Tpm2bData{filled(64)});
  expect_round_trip(Tpm2bMaxBuffer{filled(1024)});
  expect_round_trip(Tpm2bEncryptedSecret{filled(512)});
  expect_round_trip(Tpm2bName{filled(68)});
  expect_round_trip(Tpm2bContextData{filled(5120)});
  expect_round_trip(Tpm2bPrivate{filled(2048)});
  expect_round_trip(Tpm2bSensitiveData{filled(256)});
  expect_round_trip(Tpm2bCreationData{filled(1024)});
}

TEST(RoundTrip, Primitives) {
  expect_round_trip(uint8_t{0xab}, "ab");
  expect_round_trip(uint16_t{0xabcd}, "abcd");
  expect_round_trip(uint32_t{0x01020304}, "01020304");
  expect_round_trip(uint64_t{0x0102030405060708}, "0102030405060708");
}

TEST(MarshalAll, TuplesInOrder) {
  uint16_t a = 0x0102;
  Tpm2bDigest d{H("ff")};
  uint32_t c = 7;
  Writer w;
  marshal_all(w, std::tie(a, d, c));
  EXPECT_EQ(to_hex(w.data()),
            "0102"
            "0001ff"
            "00000007");
  uint16_t a2 = 0;
  Tpm2bDigest d2;
  uint32_t c2 = 0;
  Reader r(w.data());
  unmarshal_all(r, std::tie(a2, d2, c2));
  r.expect_end("tuple");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(a2, a);
  EXPECT_EQ(d2, d);
  EXPECT_EQ(c2, c);
}

// ---------------------------------------------------------------------------
// Generic hostile-input properties over every vector.

TEST(Hostile, EveryVectorRoundTrips) {
  for (const Vector& v : all_vectors()) {
    Parsed p = v.parse_exact(v.bytes);
    EXPECT_TRUE(p.ok) << v.name << ": " << p.error;
    EXPECT_EQ(to_hex(v.remarshal(v.bytes)), to_hex(v.bytes)) << v.name;
  }
}

TEST(Hostile, EveryTruncationFails) {
  size_t checked = 0;
  for (const Vector& v : all_vectors()) {
    for (size_t n = 0; n < v.bytes.size(); ++n) {
      ByteView prefix = ByteView(v.bytes).first(n);
      Parsed p = v.parse(prefix);
      EXPECT_FALSE(p.ok) << v.name << " parsed a " << n << "-byte prefix of " << v.bytes.size();
      EXPECT_FALSE(p.error.empty()) << v.name << " " << n;
      EXPECT_FALSE(v.parse_exact(prefix).ok) << v.name << " " << n;
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000u);
}

TEST(Hostile, TrailingBytesFailExactButNotTheStructure) {
  for (const Vector& v : all_vectors()) {
    for (Bytes tail : {H("00"), H("ff"), H("0000000000")}) {
      Bytes longer = concat({v.bytes, tail});
      Parsed exact = v.parse_exact(longer);
      EXPECT_FALSE(exact.ok) << v.name;
      EXPECT_NE(exact.error.find("trailing"), std::string::npos) << v.name << ": " << exact.error;
      // The structure itself is self-delimiting: it stops where it ends.
      Parsed p = v.parse(longer);
      EXPECT_TRUE(p.ok) << v.name << ": " << p.error;
      EXPECT_EQ(p.consumed, v.bytes.size()) << v.name;
    }
  }
}

TEST(Hostile, ErrorsAreParseErrors) {
  auto r = unmarshal_exact<Public>(H("0023"), "TPMT_PUBLIC");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kParse);
  EXPECT_NE(r.error().message().find("TPMT_PUBLIC.nameAlg"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("offset 2"), std::string::npos) << r.error().message();
}

// ---------------------------------------------------------------------------
// Lying sizes and counts.

template <class T>
void expect_rejected(const Bytes& b, std::string_view why, std::string_view expect_in_message = {}) {
  auto r = unmarshal_exact<T>(b, "lying");
  EXPECT_FALSE(r.ok()) << why << ": " << to_hex(b);
  if (!r.ok() && !expect_in_message.empty()) {
    EXPECT_NE(r.error().message().find(expect_in_message), std::string::npos) << why << ": " << r.error().message();
  }
  // Also at the Reader level, without the trailing-bytes check.
  Reader rd(b);
  T v{};
  unmarshal(rd, v);
  EXPECT_FALSE(rd.ok()) << why << " (reader level)";
}

template <class T>
void expect_accepted(const Bytes& b, std::string_view why) {
  auto r = unmarshal_exact<T>(b, "boundary");
  EXPECT_TRUE(r.ok()) << why << ": " << (r.ok() ? "" : r.error().message());
}

// The caller's value breaks a bound unmarshal enforces: marshal refuses it
// with kUsage naming the field, and the Writer, earlier fields and all, holds
// nothing.
template <class T>
void expect_marshal_refused(const T& value, std::string_view why, std::string_view expect_in_message) {
  Writer w;
  w.u32(0x80000001);  // what came before it in a command
  marshal(w, value);
  ASSERT_FALSE(w.ok()) << why << ": marshalled as " << to_hex(w.data());
  EXPECT_TRUE(w.data().empty()) << why << ": " << to_hex(w.data());
  EXPECT_EQ(w.status().error().kind(), ErrorKind::kUsage) << why;
  EXPECT_NE(w.status().error().message().find(expect_in_message), std::string::npos)
      << why << ": " << w.status().error().message();
  // On its own (no earlier fields, so other offsets): the same field, refused.
  auto r = marshal_to_bytes(value);
  ASSERT_FALSE(r.ok()) << why;
  EXPECT_EQ(r.error().kind(), ErrorKind::kUsage) << why;
  std::string_view field = expect_in_message.substr(0, expect_in_message.find(" at offset"));
  EXPECT_NE(r.error().message().find(field), std::string::npos) << why << ": " << r.error().message();
}

template <class T>
void check_sized_limits() {
  constexpr size_t kMax = T::kMax;
  EXPECT_EQ(encode(T{Bytes(kMax, 0x5a)}).size(), 2 + kMax);
  expect_marshal_refused(
      T{Bytes(kMax + 1, 0x5a)}, "Sized above max",
      "TPM2B at offset 4 has size " + std::to_string(kMax + 1) + ", at most " + std::to_string(kMax));
  Bytes at_max(2 + kMax, 0x5a);
  put16(at_max, 0, kMax);
  expect_accepted<T>(at_max, "size at max");
  Bytes over(2 + kMax + 1, 0x5a);
  put16(over, 0, kMax + 1);
  expect_rejected<T>(over, "size above max", "at most");
  Bytes lying = H("0010aabbcc");
  expect_rejected<T>(lying, "size above data");
  Bytes huge = H("ffff");
  expect_rejected<T>(huge, "size 0xffff, no data");
}

TEST(LyingSizes, SizedBuffers) {
  check_sized_limits<Tpm2bDigest>();
  check_sized_limits<Tpm2bData>();
  check_sized_limits<Tpm2bMaxBuffer>();
  check_sized_limits<Tpm2bEncryptedSecret>();
  check_sized_limits<Tpm2bName>();
  check_sized_limits<Tpm2bContextData>();
  check_sized_limits<Tpm2bPrivate>();
  check_sized_limits<Tpm2bSensitiveData>();
  check_sized_limits<Tpm2bCreationData>();
}

TEST(LyingSizes, PcrSelection) {
  Bytes at_max = concat({H("000b20"), Bytes(32, 0xff)});
  expect_accepted<PcrSelection>(at_max, "sizeofSelect 32");
  Bytes over = concat({H("000b21"), Bytes(33, 0xff)});
  expect_rejected<PcrSelection>(over, "sizeofSelect 33", "sizeofSelect");
  EXPECT_EQ(to_hex(encode(PcrSelection{alg::kSha256, Bytes(32, 0xff)})), to_hex(at_max));
  expect_marshal_refused(PcrSelection{alg::kSha256, Bytes(33, 0xff)}, "33 select bytes",
                         "TPMS_PCR_SELECTION.sizeofSelect at offset 6 has count 33, at most 32");
  // A u8 cast would have written sizeofSelect 0 and then 256 bytes.
  expect_marshal_refused(PcrSelection{alg::kSha256, Bytes(256, 0xff)}, "256 select bytes", "count 256");
  expect_rejected<PcrSelection>(H("000b04000001"), "sizeofSelect above data");
  expect_rejected<PcrSelection>(H("000bff000001"), "sizeofSelect 255");
}

TEST(LyingSizes, PcrSelectionList) {
  PcrSelectionList list;
  for (int i = 0; i < 17; ++i) list.banks.push_back(PcrSelection::single(alg::kSha256, 1));
  expect_marshal_refused(list, "17 banks", "TPML_PCR_SELECTION.count at offset 4 has count 17, at most 16");
  list.banks.pop_back();
  Bytes sixteen = encode(list);
  expect_accepted<PcrSelectionList>(sixteen, "16 banks");
  Bytes seventeen = grow_list(sixteen, 0, encode(PcrSelection::single(alg::kSha256, 1)));
  expect_rejected<PcrSelectionList>(seventeen, "17 banks", "TPML_PCR_SELECTION.count");
  expect_rejected<PcrSelectionList>(H("00000002"
                                      "000b03000001"),
                                    "count above data");
  expect_rejected<PcrSelectionList>(H("ffffffff"
                                      "000b03000001"),
                                    "count 0xffffffff");
  // A lying sizeofSelect inside the list.
  expect_rejected<PcrSelectionList>(H("00000001"
                                      "000b05000001"),
                                    "inner sizeofSelect above data");
}

TEST(LyingSizes, DigestList) {
  DigestList d{std::vector<Bytes>(9, filled(1))};
  expect_marshal_refused(d, "9 digests", "TPML_DIGEST.count at offset 4 has count 9, at most 8");
  d.digests.pop_back();
  Bytes eight = encode(d);
  expect_accepted<DigestList>(eight, "8 digests");
  expect_rejected<DigestList>(grow_list(eight, 0, H("000101")), "9 digests", "TPML_DIGEST.count");
  expect_marshal_refused(DigestList{{filled(32), filled(65)}}, "65-byte digest",
                         "TPM2B_DIGEST at offset 42 has size 65");
  expect_rejected<DigestList>(concat({H("000000010041"), Bytes(65, 0)}), "65-byte digest", "TPM2B_DIGEST");
  expect_rejected<DigestList>(H("00000003"
                                "0000"
                                "0000"),
                              "count above data");
  expect_rejected<DigestList>(H("00000001"
                                "0020"
                                "0102"),
                              "digest size above data");
}

TEST(LyingSizes, DigestValues) {
  DigestValues d;
  for (int i = 0; i < 17; ++i) d.digests.push_back({alg::kSha1, filled(20)});
  expect_marshal_refused(d, "17 digests", "TPML_DIGEST_VALUES.count at offset 4 has count 17, at most 16");
  d.digests.pop_back();
  Bytes sixteen = encode(d);
  expect_accepted<DigestValues>(sixteen, "16 digests");
  expect_rejected<DigestValues>(grow_list(sixteen, 0, encode(TaggedHash{alg::kSha1, filled(20)})), "17 digests",
                                "TPML_DIGEST_VALUES.count");
  expect_rejected<DigestValues>(concat({H("00000002"
                                          "0004"),
                                        filled(20)}),
                                "count above data");
  // A sha256 tag followed by a sha1-sized digest: the algorithm fixes the size.
  expect_rejected<DigestValues>(concat({H("00000001"
                                          "000b"),
                                        filled(20)}),
                                "digest shorter than its algorithm");
}

TEST(LyingSizes, TaggedHash) {
  expect_rejected<TaggedHash>(concat({H("000c"), filled(32)}), "sha384 tag, 32 bytes");
  // No size on the wire: a digest its algorithm contradicts would shift every later field.
  expect_marshal_refused(TaggedHash{alg::kSha256, filled(20)}, "sha256 tag, 20 bytes",
                         "TPMT_HA.digest at offset 6 has size 20, sha256 needs 32");
  expect_marshal_refused(TaggedHash{alg::kSha1, filled(32)}, "sha1 tag, 32 bytes", "sha1 needs 20");
  expect_marshal_refused(TaggedHash{0x0099, filled(32)}, "unknown hash",
                         "TPMT_HA.hashAlg 0x0099 at offset 4 is unknown");
  expect_marshal_refused(DigestValues{{{alg::kSha1, filled(20)}, {alg::kSha256, filled(31)}}}, "second digest short",
                         "TPMT_HA.digest at offset 32 has size 31");
  auto r = unmarshal_exact<TaggedHash>(concat({H("0004"), filled(32)}), "TPMT_HA");
  EXPECT_FALSE(r.ok()) << "sha1 with 32 bytes: the extra 12 are trailing";
}

TEST(LyingSizes, Public) {
  Bytes base = encode(ecc_with_point());
  // authPolicy at offset 8.
  {
    Public p = ecc_with_point();
    p.auth_policy = filled(64);
    Bytes at_max = encode(p);
    expect_accepted<Public>(at_max, "64-byte policy");
    expect_rejected<Public>(grow_tpm2b(at_max, 8), "65-byte policy", "authPolicy");
    p.auth_policy = filled(65);
    expect_marshal_refused(p, "65-byte policy", "TPMT_PUBLIC.authPolicy at offset 12 has size 65, at most 64");
    Bytes b = base;
    put16(b, 8, 0x0100);
    expect_rejected<Public>(b, "policy size above data");
  }
  // ECC x size at offset 22, y size at offset 56.
  {
    Public p = ecc_with_point();
    p.unique_x = filled(66);
    expect_accepted<Public>(encode(p), "66-byte x");
    expect_rejected<Public>(grow_tpm2b(encode(p), 22), "67-byte x", "TPMS_ECC_POINT.x");
    p.unique_x = filled(67);
    expect_marshal_refused(p, "67-byte x", "TPMS_ECC_POINT.x at offset 26 has size 67, at most 66");
    p = ecc_with_point();
    p.unique_y = filled(66);
    expect_accepted<Public>(encode(p), "66-byte y");
    expect_rejected<Public>(grow_tpm2b(encode(p), 56), "67-byte y", "TPMS_ECC_POINT.y");
    p.unique_y = filled(67);
    expect_marshal_refused(p, "67-byte y", "TPMS_ECC_POINT.y at offset 60 has size 67, at most 66");
    Bytes b = base;
    put16(b, 56, 0x0021);
    expect_rejected<Public>(b, "y size above data");
    b = base;
    put16(b, 22, 0x0042);
    expect_rejected<Public>(b, "x size swallowing y");
  }
  // RSA modulus.
  {
    Public p = rsa2048();
    p.unique_x = filled(512);
    expect_rejected<Public>(grow_tpm2b(encode(p), 24), "513-byte modulus", "TPM2B_PUBLIC_KEY_RSA");
    p.unique_x = filled(513);
    expect_marshal_refused(p, "513-byte modulus", "TPM2B_PUBLIC_KEY_RSA at offset 28 has size 513, at most 512");
    Bytes b = encode(rsa2048());
    put16(b, 24, 0x0101);
    expect_rejected<Public>(b, "modulus size above data");
  }
  // Keyed-hash and symcipher unique.
  for (Public p : {sealed(), symcipher()}) {
    p.unique_x = filled(64);
    Bytes at_max = encode(p);
    expect_accepted<Public>(at_max, "64-byte unique");
    expect_rejected<Public>(grow_tpm2b(at_max, at_max.size() - 66), "65-byte unique", "TPM2B_DIGEST");
    p.unique_x = filled(65);
    expect_marshal_refused(p, "65-byte unique", "TPM2B_DIGEST at offset " + std::to_string(4 + at_max.size() - 66));
  }
}

TEST(LyingSizes, PublicArea) {
  Bytes good = encode(PublicArea{ecc_with_point()});
  ASSERT_EQ(good.size(), 92u);
  Bytes b = good;
  put16(b, 0, 0x005b);
  expect_rejected<PublicArea>(b, "outer size above data", "TPM2B_PUBLIC");
  b = good;
  put16(b, 0, 0x0059);
  expect_rejected<PublicArea>(b, "outer size cuts the area");
  // Outer size covering an extra byte inside the TPM2B: trailing inside.
  b = concat({good, H("00")});
  put16(b, 0, 0x005b);
  auto r = unmarshal_exact<PublicArea>(b, "TPM2B_PUBLIC");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("trailing"), std::string::npos) << r.error().message();
  expect_rejected<PublicArea>(H("0000"), "empty TPM2B_PUBLIC");
  expect_rejected<PublicArea>(H("ffff0023"), "outer size 0xffff");
  // The inner authPolicy lies while the outer size is right.
  b = good;
  put16(b, 2 + 8, 0x0041);
  expect_rejected<PublicArea>(b, "inner policy size");
}

TEST(LyingSizes, SensitiveCreate) {
  expect_accepted<SensitiveCreate>(encode(SensitiveCreate{filled(64), filled(256)}), "at max");
  expect_rejected<SensitiveCreate>(grow_tpm2b(encode(SensitiveCreate{filled(64), {}}), 2, {0}), "65-byte userAuth",
                                   "userAuth");
  expect_rejected<SensitiveCreate>(grow_tpm2b(encode(SensitiveCreate{{}, filled(256)}), 4, {0}), "257-byte data",
                                   ".data");
  expect_marshal_refused(SensitiveCreate{filled(65), {}}, "65-byte userAuth",
                         "TPMS_SENSITIVE_CREATE.userAuth at offset 6 has size 65, at most 64");
  expect_marshal_refused(SensitiveCreate{{}, filled(257)}, "257-byte data",
                         "TPMS_SENSITIVE_CREATE.data at offset 8 has size 257, at most 256");
  Bytes good = H(kSensitiveCreateHex);
  Bytes b = good;
  put16(b, 0, 0x000d);
  expect_rejected<SensitiveCreate>(b, "outer size above data");
  b = good;
  put16(b, 0, 0x000b);
  expect_rejected<SensitiveCreate>(b, "outer size cuts the body");
  b = concat({good, H("ff")});
  put16(b, 0, 0x000d);
  expect_rejected<SensitiveCreate>(b, "padding inside the TPM2B", "trailing");
  b = good;
  put16(b, 2, 0x0009);
  expect_rejected<SensitiveCreate>(b, "userAuth size past the outer size");
}

TEST(LyingSizes, Ticket) {
  Ticket t{st::kCreation, rh::kOwner, filled(64)};
  expect_accepted<Ticket>(encode(t), "64-byte digest");
  expect_rejected<Ticket>(grow_tpm2b(encode(t), 6), "65-byte digest", "TPMT_TK.digest");
  t.digest = filled(65);
  expect_marshal_refused(t, "65-byte digest", "TPMT_TK.digest at offset 10 has size 65, at most 64");
  expect_rejected<Ticket>(H("8021400000070020aabb"), "digest size above data");
}

TEST(LyingSizes, Context) {
  Context c{1, 0x80000000, rh::kNull, filled(5120)};
  expect_accepted<Context>(encode(c), "5120-byte blob");
  expect_rejected<Context>(grow_tpm2b(encode(c), 16), "5121-byte blob", "contextBlob");
  c.blob = filled(5121);
  expect_marshal_refused(c, "5121-byte blob", "TPMS_CONTEXT.contextBlob at offset 20 has size 5121, at most 5120");
  Bytes b = H(kContextHex);
  put16(b, 16, 0x0183);
  expect_rejected<Context>(b, "blob size above data");
}

TEST(LyingSizes, CapabilityData) {
  struct Kind {
    uint32_t cap;
    size_t entry;  // bytes per entry
    const char* count_name;
  };
  for (Kind k : {Kind{cap::kAlgs, 6, "TPML_ALG_PROPERTY.count"}, Kind{cap::kHandles, 4, "TPML_HANDLE.count"},
                 Kind{cap::kCommands, 4, "count"}, Kind{cap::kTpmProperties, 8, "TPML_TAGGED_TPM_PROPERTY.count"},
                 Kind{cap::kEccCurves, 2, "TPML_ECC_CURVE.count"}}) {
    Bytes at_max(8 + 1024 * k.entry, 0);
    put32(at_max, 0, k.cap);
    put32(at_max, 4, 1024);
    expect_accepted<CapabilityData>(at_max, "1024 entries");
    Bytes over(8 + 1025 * k.entry, 0);
    put32(over, 0, k.cap);
    put32(over, 4, 1025);
    expect_rejected<CapabilityData>(over, "1025 entries", k.count_name);
    Bytes lying(8 + 3 * k.entry, 0);
    put32(lying, 0, k.cap);
    put32(lying, 4, 4);
    expect_rejected<CapabilityData>(lying, "count above data");
    Bytes huge(8, 0);
    put32(huge, 0, k.cap);
    put32(huge, 4, 0xffffffff);
    expect_rejected<CapabilityData>(huge, "count 0xffffffff");
  }
  expect_rejected<CapabilityData>(H("00000005"
                                    "00000011"),
                                  "17 PCR banks");
  expect_rejected<CapabilityData>(H("00000005"
                                    "00000001"
                                    "000b2100"),
                                  "sizeofSelect 33");
}

// ---------------------------------------------------------------------------
// What marshal refuses beyond sizes, and how a failure deep inside a
// structure leaves the Writer.

TEST(MarshalLimits, NoLayoutIsGuessed) {
  Public p = null_template();
  p.type = alg::kNull;
  expect_marshal_refused(p, "unknown type", "TPMT_PUBLIC.type 0x0010 at offset 4 has no layout");
  CapabilityData c;
  c.capability = 0x00000003;  // PP_COMMANDS: not a capability tpmsec parses
  expect_marshal_refused(c, "unknown capability", "unsupported capability 0x00000003");
}

TEST(MarshalLimits, AFailureDeepInsideEmptiesTheWholeWriter) {
  Public p = ecc_with_point();
  p.auth_policy = filled(65);
  // TPM2B_PUBLIC's size field, then TPMT_PUBLIC: the inner field is named.
  expect_marshal_refused(PublicArea{p}, "policy inside TPM2B_PUBLIC",
                         "TPMT_PUBLIC.authPolicy at offset 14 has size 65, at most 64");

  // A command's parameters: the fourth one is over its max.
  SensitiveCreate sensitive{str("pw"), {}};
  PublicArea in_public{null_template()};
  Tpm2bData outside_info{filled(65)};
  PcrSelectionList creation_pcr;
  Writer w;
  marshal_all(w, std::tie(sensitive, in_public, outside_info, creation_pcr));
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(w.data().empty()) << to_hex(w.data());
  EXPECT_EQ(w.status().error().kind(), ErrorKind::kUsage);
  size_t at = encode(sensitive).size() + encode(in_public).size();
  EXPECT_NE(w.status().error().message().find("TPM2B at offset " + std::to_string(at) + " has size 65, at most 64"),
            std::string::npos)
      << w.status().error().message();
}

// ---------------------------------------------------------------------------
// Unknown algorithm ids that select a layout.

TEST(UnknownIds, TaggedHash) {
  for (uint16_t id : {uint16_t{0x0000}, alg::kNull, uint16_t{0x0099}, alg::kHmac, uint16_t{0xffff}}) {
    Bytes b = concat({Bytes{static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id)}, filled(64)});
    Reader r(b);
    TaggedHash t;
    unmarshal(r, t);
    EXPECT_FALSE(r.ok()) << id;
    EXPECT_NE(r.status().error().message().find("unknown TPMT_HA hash algorithm"), std::string::npos)
        << r.status().error().message();
  }
  expect_rejected<DigestValues>(concat({H("00000002"
                                          "0004"),
                                        filled(20), H("0099"), filled(32)}),
                                "second digest unknown", "unknown");
}

TEST(UnknownIds, SymDef) {
  for (uint16_t id : {uint16_t{0x0003} /* TDES */, uint16_t{0x0099}, alg::kSha256, uint16_t{0xffff}}) {
    Bytes b = H("000000800043");
    put16(b, 0, id);
    expect_rejected<SymDef>(b, "unknown symmetric algorithm", "unknown symmetric algorithm");
  }
}

TEST(UnknownIds, PublicType) {
  for (uint16_t type : {uint16_t{0x0000}, alg::kNull, alg::kSha256, uint16_t{0x0099}, uint16_t{0xffff}}) {
    Bytes b = H(kOutPublicHex);
    put16(b, 0, type);
    expect_rejected<Public>(b, "unknown type", "TPMT_PUBLIC.type");
  }
}

TEST(UnknownIds, PublicNameAlg) {
  Bytes b = H(kOutPublicHex);
  put16(b, 2, 0x0099);
  expect_rejected<Public>(b, "unknown nameAlg", "TPMT_PUBLIC.nameAlg");
  put16(b, 2, alg::kAes);
  expect_rejected<Public>(b, "nameAlg AES", "TPMT_PUBLIC.nameAlg");
}

TEST(UnknownIds, PublicSymmetric) {
  Bytes ecc = H(kOutPublicHex);
  put16(ecc, 10, 0x0099);
  expect_rejected<Public>(ecc, "ECC symmetric", "unknown symmetric algorithm");
  Bytes rsa = encode(rsa2048());
  put16(rsa, 10, 0x0099);
  expect_rejected<Public>(rsa, "RSA symmetric", "unknown symmetric algorithm");
  Bytes sym = encode(symcipher());
  put16(sym, 10, 0x0099);
  expect_rejected<Public>(sym, "symcipher symmetric", "unknown symmetric algorithm");
}

TEST(UnknownIds, PublicSchemes) {
  // ECC scheme at offset 16, kdf at offset 20 in the null template.
  Bytes b = H(kOutPublicHex);
  put16(b, 16, 0x0099);
  expect_rejected<Public>(b, "ECC scheme", "TPMT_ECC_SCHEME");
  b = H(kOutPublicHex);
  put16(b, 20, 0x0099);
  expect_rejected<Public>(b, "ECC kdf", "TPMT_KDF_SCHEME");
  b = H(kOutPublicHex);
  put16(b, 16, alg::kXor);
  expect_rejected<Public>(b, "XOR is a keyed-hash scheme only", "TPMT_ECC_SCHEME");
  // RSA scheme at offset 16.
  b = encode(rsa2048());
  put16(b, 16, 0x0099);
  expect_rejected<Public>(b, "RSA scheme", "TPMT_RSA_SCHEME");
  // Keyed-hash scheme at offset 10.
  b = encode(sealed());
  put16(b, 10, 0x0099);
  expect_rejected<Public>(b, "keyed-hash scheme", "TPMT_KEYEDHASH_SCHEME");
  b = encode(sealed());
  put16(b, 10, alg::kAes);
  expect_rejected<Public>(b, "keyed-hash scheme AES", "TPMT_KEYEDHASH_SCHEME");
}

TEST(UnknownIds, Capability) {
  for (uint32_t c : {0x00000003u /* PP_COMMANDS */, 0x00000004u /* AUDIT_COMMANDS */, 0x00000007u /* PCR_PROPERTIES */,
                     0x00000009u /* AUTH_POLICIES */, 0x00000100u /* VENDOR_PROPERTY */, 0xffffffffu}) {
    Bytes b = H("0000000000000000");
    put32(b, 0, c);
    expect_rejected<CapabilityData>(b, "unknown capability", "unsupported capability");
  }
}

// ---------------------------------------------------------------------------
// Parsing overwrites the target completely.

TEST(Reuse, UnmarshalResetsTarget) {
  Public p = rsa2048();
  Bytes tmpl = H(kNullTemplateHex);
  Reader r(tmpl);
  unmarshal(r, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(p, null_template());
  CapabilityData c = cap_algs();
  Bytes curves = encode(cap_curves());
  Reader rc(curves);
  unmarshal(rc, c);
  ASSERT_TRUE(rc.ok());
  EXPECT_EQ(c, cap_curves());
  SymDef s = SymDef::aes128_cfb();
  Bytes null_sym = H("0010");
  Reader rs(null_sym);
  unmarshal(rs, s);
  EXPECT_EQ(s, SymDef{});
}

}  // namespace
}  // namespace tpmsec
