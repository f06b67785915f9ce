// Unit tests for the wire layer: Reader, Writer, the big-endian helpers and
// the hex / byte helpers of bytes.h.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

Bytes H(std::string_view hex) {
  auto b = from_hex(hex);
  EXPECT_TRUE(b.ok()) << hex;
  return b.ok() ? *b : Bytes{};
}

std::string error_of(const Reader& r) {
  Status s = r.status();
  return s.ok() ? std::string() : s.error().message();
}

// ---------------------------------------------------------------------------
// Reader primitives

TEST(Reader, ReadsEveryPrimitiveBigEndian) {
  Bytes data = H("01" "0203" "04050607" "08090a0b0c0d0e0f" "aabbcc");
  Reader r(data);
  EXPECT_EQ(r.offset(), 0u);
  EXPECT_EQ(r.remaining(), data.size());
  EXPECT_EQ(r.u8("a"), 0x01);
  EXPECT_EQ(r.offset(), 1u);
  EXPECT_EQ(r.u16("b"), 0x0203);
  EXPECT_EQ(r.offset(), 3u);
  EXPECT_EQ(r.u32("c"), 0x04050607u);
  EXPECT_EQ(r.offset(), 7u);
  EXPECT_EQ(r.u64("d"), 0x08090a0b0c0d0e0full);
  EXPECT_EQ(r.offset(), 15u);
  ByteView b = r.bytes(3, "e");
  EXPECT_EQ(Bytes(b.begin(), b.end()), H("aabbcc"));
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  r.expect_end("all");
  EXPECT_TRUE(r.ok());
}

TEST(Reader, HighBitsAreNotSignExtended) {
  Bytes data = H("ff" "ffff" "ffffffff" "ffffffffffffffff" "80" "8000" "80000000" "8000000000000000");
  Reader r(data);
  EXPECT_EQ(r.u8("a"), 0xffu);
  EXPECT_EQ(r.u16("b"), 0xffffu);
  EXPECT_EQ(r.u32("c"), 0xffffffffu);
  EXPECT_EQ(r.u64("d"), 0xffffffffffffffffull);
  EXPECT_EQ(r.u8("e"), 0x80u);
  EXPECT_EQ(r.u16("f"), 0x8000u);
  EXPECT_EQ(r.u32("g"), 0x80000000u);
  EXPECT_EQ(r.u64("h"), 0x8000000000000000ull);
  EXPECT_TRUE(r.ok());
}

TEST(Reader, ZeroLengthBytesAtEndIsFine) {
  Bytes data = H("00");
  Reader r(data);
  r.u8("x");
  ByteView b = r.bytes(0, "nothing");
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(r.ok());
  Reader empty{ByteView()};
  EXPECT_TRUE(empty.bytes(0, "nothing").empty());
  EXPECT_TRUE(empty.ok());
  empty.expect_end("empty");
  EXPECT_TRUE(empty.ok());
}

TEST(Reader, EveryPrimitiveFailsOnEveryShortInput) {
  for (size_t width : {size_t{1}, size_t{2}, size_t{4}, size_t{8}, size_t{5}}) {
    for (size_t have = 0; have < width; ++have) {
      Bytes data(have, 0xee);
      Reader r(data);
      uint64_t v = 1;
      switch (width) {
        case 1: v = r.u8("the_u8"); break;
        case 2: v = r.u16("the_u16"); break;
        case 4: v = r.u32("the_u32"); break;
        case 8: v = r.u64("the_u64"); break;
        default: v = r.bytes(width, "the_bytes").size(); break;
      }
      EXPECT_FALSE(r.ok()) << width << " " << have;
      EXPECT_EQ(v, 0u) << "a failed read must yield zero";
      EXPECT_EQ(r.remaining(), 0u);
      EXPECT_TRUE(r.rest().empty());
      Status s = r.status();
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.error().kind(), ErrorKind::kParse);
      EXPECT_NE(s.error().message().find("the_"), std::string::npos) << s.error().message();
    }
  }
}

TEST(Reader, ErrorNamesFieldOffsetAndSizes) {
  Bytes data = H("0102030405");
  Reader r(data);
  r.u32("header");
  r.u16("response size");
  ASSERT_FALSE(r.ok());
  std::string m = error_of(r);
  EXPECT_NE(m.find("response size"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 4"), std::string::npos) << m;
  EXPECT_NE(m.find("expected 2 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("have 1"), std::string::npos) << m;
}

TEST(Reader, ErrorUsesSingularByte) {
  Reader r{ByteView()};
  r.u8("flag");
  EXPECT_NE(error_of(r).find("expected 1 byte at"), std::string::npos) << error_of(r);
}

TEST(Reader, BaseOffsetShiftsReportedOffsets) {
  Bytes data = H("0001");
  Reader r(data, 100);
  EXPECT_EQ(r.offset(), 100u);
  r.u16("a");
  EXPECT_EQ(r.offset(), 102u);
  r.u8("late field");
  EXPECT_NE(error_of(r).find("offset 102"), std::string::npos) << error_of(r);
  EXPECT_NE(error_of(r).find("late field"), std::string::npos);
}

TEST(Reader, ErrorIsStickyAndKeepsTheFirstMessage) {
  Bytes data = H("00010203040506070809");
  Reader r(data);
  r.u8("first");
  r.bytes(20, "too long");
  ASSERT_FALSE(r.ok());
  std::string first = error_of(r);
  EXPECT_NE(first.find("too long"), std::string::npos) << first;
  EXPECT_NE(first.find("offset 1"), std::string::npos) << first;
  // Plenty of bytes remain, but every later read fails and yields zero.
  EXPECT_EQ(r.u8("later"), 0u);
  EXPECT_EQ(r.u16("later"), 0u);
  EXPECT_EQ(r.u32("later"), 0u);
  EXPECT_EQ(r.u64("later"), 0u);
  EXPECT_TRUE(r.bytes(1, "later").empty());
  EXPECT_TRUE(r.tpm2b("later").empty());
  EXPECT_EQ(r.count("later", 100), 0u);
  Reader s = r.sub(1, "later");
  EXPECT_FALSE(s.ok());
  Reader z = r.sized("later");
  EXPECT_FALSE(z.ok());
  r.fail("another failure");
  r.expect_end("later");
  EXPECT_EQ(error_of(r), first);
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_TRUE(r.rest().empty());
}

TEST(Reader, FailRecordsMessageOnce) {
  Bytes data = H("0000");
  Reader r(data);
  EXPECT_TRUE(r.ok());
  r.fail("unknown algorithm 0x0099");
  EXPECT_FALSE(r.ok());
  r.fail("second");
  EXPECT_EQ(error_of(r), "unknown algorithm 0x0099");
  EXPECT_EQ(r.status().error().kind(), ErrorKind::kParse);
}

TEST(Reader, RestIsUnconsumedTail) {
  Bytes data = H("01020304");
  Reader r(data);
  r.u8("a");
  ByteView rest = r.rest();
  EXPECT_EQ(Bytes(rest.begin(), rest.end()), H("020304"));
  EXPECT_EQ(r.remaining(), 3u);
}

// ---------------------------------------------------------------------------
// TPM2B, count, sub, sized

TEST(Reader, Tpm2bReadsSizedBytes) {
  Bytes data = H("0003aabbcc" "0000" "ff");
  Reader r(data);
  ByteView b = r.tpm2b("blob", 3);
  EXPECT_EQ(Bytes(b.begin(), b.end()), H("aabbcc"));
  EXPECT_TRUE(r.tpm2b("empty", 0).empty());
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 1u);
}

TEST(Reader, Tpm2bRefusesSizeAboveMax) {
  Bytes data = H("0004aabbccdd");
  Reader r(data);
  EXPECT_TRUE(r.tpm2b("nonce", 3).empty());
  ASSERT_FALSE(r.ok());
  std::string m = error_of(r);
  EXPECT_NE(m.find("nonce"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 0"), std::string::npos) << m;
  EXPECT_NE(m.find("size 4"), std::string::npos) << m;
  EXPECT_NE(m.find("at most 3"), std::string::npos) << m;
}

TEST(Reader, Tpm2bRefusesSizeAboveData) {
  Bytes data = H("00" "0005aabbcc");
  Reader r(data);
  r.u8("pad");
  EXPECT_TRUE(r.tpm2b("digest").empty());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(error_of(r).find("digest"), std::string::npos) << error_of(r);
  EXPECT_NE(error_of(r).find("offset 3"), std::string::npos) << error_of(r);
}

TEST(Reader, Tpm2bTruncatedSizeField) {
  Bytes data = H("00");
  Reader r(data);
  r.tpm2b("blob");
  EXPECT_FALSE(r.ok());
}

TEST(Reader, Tpm2bDefaultMaxAcceptsFullU16) {
  Bytes data(2 + 0xffff, 0x5a);
  data[0] = 0xff;
  data[1] = 0xff;
  Reader r(data);
  EXPECT_EQ(r.tpm2b("big").size(), 0xffffu);
  EXPECT_TRUE(r.ok());
}

TEST(Reader, CountWithinMax) {
  Bytes data = H("00000003" "00000000");
  Reader r(data);
  EXPECT_EQ(r.count("list.count", 3), 3u);
  EXPECT_EQ(r.count("list.count", 0), 0u);
  EXPECT_TRUE(r.ok());
}

TEST(Reader, CountAboveMaxIsRefused) {
  Bytes data = H("00" "00000011");
  Reader r(data);
  r.u8("pad");
  EXPECT_EQ(r.count("TPML_X.count", 16), 0u);
  ASSERT_FALSE(r.ok());
  std::string m = error_of(r);
  EXPECT_NE(m.find("TPML_X.count"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 1"), std::string::npos) << m;
  EXPECT_NE(m.find("count 17"), std::string::npos) << m;
  EXPECT_NE(m.find("at most 16"), std::string::npos) << m;
}

TEST(Reader, CountHugeIsRefusedNotAllocated) {
  Bytes data = H("ffffffff");
  Reader r(data);
  EXPECT_EQ(r.count("count", 1024), 0u);
  EXPECT_FALSE(r.ok());
}

TEST(Reader, CountTruncated) {
  Bytes data = H("000000");
  Reader r(data);
  EXPECT_EQ(r.count("count", 10), 0u);
  EXPECT_FALSE(r.ok());
}

TEST(Reader, SubReadsWindowAndAdvancesParent) {
  Bytes data = H("aa" "01020304" "bb");
  Reader r(data);
  r.u8("a");
  Reader s = r.sub(4, "window");
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.offset(), 5u);
  EXPECT_EQ(s.offset(), 1u) << "sub reader keeps absolute offsets";
  EXPECT_EQ(s.remaining(), 4u);
  EXPECT_EQ(s.u16("x"), 0x0102);
  EXPECT_EQ(s.u16("y"), 0x0304);
  s.expect_end("window");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(r.u8("b"), 0xbb);
  // Reading past the window fails in the window only, with an absolute offset.
  Reader t{ByteView(data).subspan(0, 3), 0};
  Reader w = t.sub(2, "w");
  w.u32("beyond window");
  EXPECT_FALSE(w.ok());
  EXPECT_NE(error_of(w).find("offset 0"), std::string::npos) << error_of(w);
  EXPECT_TRUE(t.ok());
  EXPECT_EQ(t.remaining(), 1u);
  t.absorb(w);
  EXPECT_FALSE(t.ok());
  EXPECT_EQ(error_of(t), error_of(w));
}

TEST(Reader, SubBeyondDataFailsParentAndChild) {
  Bytes data = H("010203");
  Reader r(data);
  Reader s = r.sub(4, "too big");
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.remaining(), 0u);
  EXPECT_NE(error_of(s).find("too big"), std::string::npos) << error_of(s);
  EXPECT_EQ(s.u8("x"), 0u);
}

TEST(Reader, SubErrorOffsetIsAbsolute) {
  Bytes data = H("0000" "0003" "0102");
  Reader r(data);
  r.u16("pad");
  Reader body = r.sized("TPM2B_THING");
  EXPECT_FALSE(r.ok()) << "size 3 with 2 bytes present";
  EXPECT_NE(error_of(r).find("TPM2B_THING"), std::string::npos);
  EXPECT_NE(error_of(r).find("offset 4"), std::string::npos) << error_of(r);
  EXPECT_FALSE(body.ok());
}

TEST(Reader, SizedReadsBody) {
  Bytes data = H("0004" "0001" "0002" "99");
  Reader r(data);
  Reader body = r.sized("TPM2B_S", 4);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(body.offset(), 2u);
  EXPECT_EQ(body.u16("a"), 1);
  EXPECT_EQ(body.u16("b"), 2);
  body.expect_end("TPM2B_S");
  EXPECT_TRUE(body.ok());
  EXPECT_EQ(r.u8("tail"), 0x99);
}

TEST(Reader, SizedRefusesAboveMax) {
  Bytes data = H("0005" "0102030405");
  Reader r(data);
  Reader body = r.sized("TPM2B_PUBLIC", 4);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(body.ok());
  EXPECT_NE(error_of(r).find("TPM2B_PUBLIC"), std::string::npos);
  EXPECT_NE(error_of(r).find("at most 4"), std::string::npos) << error_of(r);
  EXPECT_EQ(error_of(body), error_of(r));
  EXPECT_EQ(body.remaining(), 0u);
}

TEST(Reader, SizedRefusesAboveData) {
  Bytes data = H("0009" "0102030405");
  Reader r(data);
  Reader body = r.sized("TPM2B_PUBLIC");
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(body.ok());
}

TEST(Reader, SizedTruncatedSizeField) {
  Bytes data = H("00");
  Reader r(data);
  Reader body = r.sized("TPM2B_PUBLIC");
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(body.ok());
}

TEST(Reader, ExpectEndReportsTrailingBytes) {
  Bytes data = H("000102");
  Reader r(data);
  r.u8("a");
  r.expect_end("TPMS_THING");
  ASSERT_FALSE(r.ok());
  std::string m = error_of(r);
  EXPECT_NE(m.find("TPMS_THING"), std::string::npos) << m;
  EXPECT_NE(m.find("2 unexpected trailing bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("offset 1"), std::string::npos) << m;

  Bytes one = H("0001");
  Reader q(one);
  q.u8("a");
  q.expect_end("X");
  EXPECT_NE(error_of(q).find("1 unexpected trailing byte at"), std::string::npos) << error_of(q);
}

TEST(Reader, AbsorbOfHealthyReaderIsNoop) {
  Bytes data = H("0102");
  Reader r(data);
  Reader inner = r.sub(1, "inner");
  inner.u8("x");
  r.absorb(inner);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.u8("y"), 2);
}

TEST(Reader, StatusOkWhenHealthy) {
  Reader r{ByteView()};
  EXPECT_TRUE(r.status().ok());
}

// ---------------------------------------------------------------------------
// Writer

TEST(Writer, WritesEveryPrimitiveBigEndian) {
  Writer w;
  EXPECT_EQ(w.size(), 0u);
  w.u8(0x01);
  w.u16(0x0203);
  w.u32(0x04050607);
  w.u64(0x08090a0b0c0d0e0full);
  Bytes tail = H("aabb");
  w.bytes(tail);
  EXPECT_EQ(w.size(), 17u);
  EXPECT_EQ(to_hex(w.data()), "01020304050607" "08090a0b0c0d0e0f" "aabb");
}

TEST(Writer, Tpm2bPrefixesSize) {
  Writer w;
  w.tpm2b(H("aabbcc"));
  w.tpm2b({});
  EXPECT_EQ(to_hex(w.data()), "0003aabbcc0000");
}

TEST(Writer, SizeMarksArePatched) {
  Writer w;
  w.u8(0xff);
  size_t outer = w.begin_size32();
  size_t inner = w.begin_size16();
  w.u32(0xdeadbeef);
  w.u8(0x01);
  w.end_size16(inner);
  w.u16(0x7777);
  w.end_size32(outer);
  EXPECT_EQ(to_hex(w.data()), "ff" "00000009" "0005" "deadbeef01" "7777");
}

TEST(Writer, EmptySizedBodies) {
  Writer w;
  size_t a = w.begin_size16();
  w.end_size16(a);
  size_t b = w.begin_size32();
  w.end_size32(b);
  EXPECT_EQ(to_hex(w.data()), "000000000000");
}

TEST(Writer, LargeSize16Body) {
  Writer w;
  size_t m = w.begin_size16();
  w.bytes(Bytes(0x1234, 0));
  w.end_size16(m);
  EXPECT_EQ(w.data()[0], 0x12);
  EXPECT_EQ(w.data()[1], 0x34);
}

TEST(Writer, AtAndTake) {
  Writer w;
  w.u32(0);
  store_be32(w.at(0), 0x11223344);
  EXPECT_EQ(to_hex(w.data()), "11223344");
  Bytes taken = w.take();
  EXPECT_EQ(to_hex(taken), "11223344");
}

TEST(Writer, ReaderRoundTrip) {
  Writer w;
  w.u8(7);
  w.u16(0xbeef);
  w.u32(0xcafef00d);
  w.u64(0x0123456789abcdefull);
  w.tpm2b(H("010203"));
  size_t m = w.begin_size16();
  w.u16(42);
  w.end_size16(m);
  Bytes data = w.take();
  Reader r(data);
  EXPECT_EQ(r.u8("a"), 7);
  EXPECT_EQ(r.u16("b"), 0xbeef);
  EXPECT_EQ(r.u32("c"), 0xcafef00du);
  EXPECT_EQ(r.u64("d"), 0x0123456789abcdefull);
  ByteView t = r.tpm2b("e", 3);
  EXPECT_EQ(to_hex(t), "010203");
  Reader body = r.sized("f", 2);
  EXPECT_EQ(body.u16("g"), 42);
  body.expect_end("f");
  r.absorb(body);
  r.expect_end("all");
  EXPECT_TRUE(r.ok()) << error_of(r);
}

// ---------------------------------------------------------------------------
// Big-endian helpers

TEST(BigEndian, StoreLoadBe32) {
  uint8_t b[4] = {};
  store_be32(b, 0x80010203);
  EXPECT_EQ(b[0], 0x80);
  EXPECT_EQ(b[1], 0x01);
  EXPECT_EQ(b[2], 0x02);
  EXPECT_EQ(b[3], 0x03);
  EXPECT_EQ(load_be32(b), 0x80010203u);
  EXPECT_EQ(to_hex(be32(0x40000007)), "40000007");
  EXPECT_EQ(be32(0).size(), 4u);
}

// ---------------------------------------------------------------------------
// bytes.h

TEST(Hex, ToHexIsLowercase) {
  const uint8_t b[] = {0x00, 0x0f, 0xa0, 0xff, 0x5A};
  EXPECT_EQ(to_hex(b), "000fa0ff5a");
  EXPECT_EQ(to_hex(ByteView()), "");
}

TEST(Hex, FromHexAcceptsBothCasesAndPrefix) {
  auto a = from_hex("DeadBEEF");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (Bytes{0xde, 0xad, 0xbe, 0xef}));
  auto b = from_hex("0x0102");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (Bytes{0x01, 0x02}));
  auto c = from_hex("0X0A");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (Bytes{0x0a}));
  auto e = from_hex("");
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->empty());
  auto p = from_hex("0x");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
}

TEST(Hex, FromHexRejectsOddLength) {
  auto r = from_hex("abc");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(r.error().message().find("odd"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("3"), std::string::npos);
}

TEST(Hex, FromHexRejectsBadDigitWithPosition) {
  auto hi = from_hex("00g0");
  ASSERT_FALSE(hi.ok());
  EXPECT_EQ(hi.error().kind(), ErrorKind::kUsage);
  EXPECT_NE(hi.error().message().find("position 2"), std::string::npos) << hi.error().message();
  auto lo = from_hex("000z");
  ASSERT_FALSE(lo.ok());
  EXPECT_NE(lo.error().message().find("position 3"), std::string::npos) << lo.error().message();
  EXPECT_FALSE(from_hex("00 1").ok());
  EXPECT_FALSE(from_hex("0x0x").ok());
  EXPECT_FALSE(from_hex("-1").ok());
}

TEST(Hex, RoundTripAllByteValues) {
  Bytes all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  std::string hex = to_hex(all);
  EXPECT_EQ(hex.size(), 512u);
  auto back = from_hex(hex);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, all);
}

TEST(Bytes, AsBytesAndConcat) {
  ByteView v = as_bytes("ab");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], 'a');
  Bytes x = H("01"), y = H("0203");
  EXPECT_EQ(to_hex(concat({x, y, as_bytes("")})), "010203");
  EXPECT_TRUE(concat({}).empty());
}

TEST(SecretBytes, AppendResizeCloneMove) {
  SecretBytes s;
  EXPECT_TRUE(s.empty());
  s.append(as_bytes("abc"));
  for (int i = 0; i < 10; ++i) s.append(as_bytes("0123456789"));
  EXPECT_EQ(s.size(), 103u);
  EXPECT_EQ(std::memcmp(s.data(), "abc0123", 7), 0);
  SecretBytes c = s.clone();
  EXPECT_EQ(to_hex(c.view()), to_hex(s.view()));
  s.resize(2);
  EXPECT_EQ(to_hex(s.view()), "6162");
  s.resize(4);
  EXPECT_EQ(to_hex(s.view()), "61620000");
  SecretBytes m = std::move(s);
  EXPECT_EQ(m.size(), 4u);
  EXPECT_TRUE(s.empty());  // NOLINT(bugprone-use-after-move): moved-from is documented empty
  m.clear();
  EXPECT_TRUE(m.empty());
  SecretBytes z(3);
  EXPECT_EQ(to_hex(z.view()), "000000");
}

// Known bug (src/wire/bytes.cc, SecretBytes::append): when `data` is a view
// of the SecretBytes itself and the append must grow the buffer, the old
// buffer is wiped and freed (clear(); bytes_ = std::move(bigger)) before
// `data` is copied from it: heap-use-after-free under ASan, wiped bytes
// otherwise. Enable once fixed.
TEST(SecretBytes, AppendOwnView) {
  SecretBytes s(as_bytes("abc"));
  s.append(s.view());
  EXPECT_EQ(to_hex(s.view()), "616263616263");
}

TEST(SecureWipe, ZeroesBuffer) {
  uint8_t buf[8];
  std::memset(buf, 0xa5, sizeof buf);
  secure_wipe(buf, sizeof buf);
  for (uint8_t b : buf) EXPECT_EQ(b, 0);
}

// ---------------------------------------------------------------------------
// result.h

TEST(Result, WithContextKeepsKindAndCode) {
  Error e(ErrorKind::kTpm, "bad", 0x9a2);
  Error c = e.with_context("PCR_Extend");
  EXPECT_EQ(c.message(), "PCR_Extend: bad");
  EXPECT_EQ(c.kind(), ErrorKind::kTpm);
  EXPECT_EQ(c.tpm_rc(), 0x9a2u);
  Result<int> ok = 3;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  Result<int> bad = parse_error("x");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind(), ErrorKind::kParse);
}

}  // namespace
}  // namespace tpmsec
