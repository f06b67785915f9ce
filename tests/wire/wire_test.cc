// Unit tests for the wire layer: Reader, Writer, the big-endian helpers and
// the hex / byte helpers of bytes.h.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "support/test_data.h"
#include "tpmsec/bytes.h"
#include "tpmsec/result.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using testing::H;

std::string error_of(const Reader& r) {
  Status s = r.status();
  return s.ok() ? std::string() : s.error().message();
}

// ---------------------------------------------------------------------------
// Reader primitives

TEST(Reader, ReadsEveryPrimitiveBigEndian) {
  Bytes data =
      H("01"
        "0203"
        "04050607"
        "08090a0b0c0d0e0f"
        "aabbcc");
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
  Bytes data =
      H("ff"
        "ffff"
        "ffffffff"
        "ffffffffffffffff"
        "80"
        "8000"
        "80000000"
        "8000000000000000");
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
        case 1:
          v = r.u8("the_u8");
          break;
        case 2:
          v = r.u16("the_u16");
          break;
        case 4:
          v = r.u32("the_u32");
          break;
        case 8:
          v = r.u64("the_u64");
          break;
        default:
          v = r.bytes(width, "the_bytes").size();
          break;
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
  Bytes data =
      H("0003aabbcc"
        "0000"
        "ff");
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
  Bytes data =
      H("00"
        "0005aabbcc");
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
  Bytes data =
      H("00000003"
        "00000000");
  Reader r(data);
  EXPECT_EQ(r.count("list.count", 3), 3u);
  EXPECT_EQ(r.count("list.count", 0), 0u);
  EXPECT_TRUE(r.ok());
}

TEST(Reader, CountAboveMaxIsRefused) {
  Bytes data =
      H("00"
        "00000011");
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
  Bytes data =
      H("aa"
        "01020304"
        "bb");
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
  Bytes data =
      H("0000"
        "0003"
        "0102");
  Reader r(data);
  r.u16("pad");
  Reader body = r.sized("TPM2B_THING");
  EXPECT_FALSE(r.ok()) << "size 3 with 2 bytes present";
  EXPECT_NE(error_of(r).find("TPM2B_THING"), std::string::npos);
  EXPECT_NE(error_of(r).find("offset 4"), std::string::npos) << error_of(r);
  EXPECT_FALSE(body.ok());
}

TEST(Reader, SizedReadsBody) {
  Bytes data =
      H("0004"
        "0001"
        "0002"
        "99");
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
  Bytes data =
      H("0005"
        "0102030405");
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
  Bytes data =
      H("0009"
        "0102030405");
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

std::string error_of(const Writer& w) {
  Status s = w.status();
  return s.ok() ? std::string() : s.error().message();
}

// The Writer failed with kUsage, its message holds every one of `parts`, it
// holds no bytes, and finish() returns the same error.
void expect_refused(Writer& w, std::initializer_list<std::string_view> parts) {
  ASSERT_FALSE(w.ok());
  Status s = w.status();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind(), ErrorKind::kUsage);
  for (std::string_view part : parts) {
    EXPECT_NE(s.error().message().find(part), std::string::npos) << "'" << part << "' not in: " << s.error().message();
  }
  EXPECT_EQ(w.size(), 0u);
  EXPECT_TRUE(w.data().empty()) << "a failed Writer still holds " << to_hex(w.data());
  auto out = w.finish();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().message(), s.error().message());
  EXPECT_EQ(out.error().kind(), ErrorKind::kUsage);
}

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
  EXPECT_EQ(to_hex(w.data()),
            "01020304050607"
            "08090a0b0c0d0e0f"
            "aabb");
  EXPECT_TRUE(w.ok());
}

TEST(Writer, Tpm2bPrefixesSize) {
  Writer w;
  w.tpm2b(H("aabbcc"), "blob");
  w.tpm2b({}, "empty");
  EXPECT_EQ(to_hex(w.data()), "0003aabbcc0000");
}

TEST(Writer, SizeMarksArePatched) {
  Writer w;
  w.u8(0xff);
  auto outer = w.begin_size32("outer");
  auto inner = w.begin_size16("inner");
  w.u32(0xdeadbeef);
  w.u8(0x01);
  w.end_size(inner);
  w.u16(0x7777);
  w.end_size(outer);
  EXPECT_EQ(to_hex(w.data()),
            "ff"
            "00000009"
            "0005"
            "deadbeef01"
            "7777");
}

TEST(Writer, TotalSizeCountsEveryByteItselfIncluded) {
  Writer w;
  w.u16(0x8001);
  auto total = w.begin_total_size32("commandSize");
  w.u32(0x0000017b);
  w.u16(0x0020);
  w.end_size(total);
  EXPECT_EQ(to_hex(w.data()),
            "8001"
            "0000000c"
            "0000017b"
            "0020");
}

TEST(Writer, EmptySizedBodies) {
  Writer w;
  auto a = w.begin_size16("a");
  w.end_size(a);
  auto b = w.begin_size32("b");
  w.end_size(b);
  EXPECT_EQ(to_hex(w.data()), "000000000000");
}

TEST(Writer, LargeSize16Body) {
  Writer w;
  auto m = w.begin_size16("body");
  w.bytes(Bytes(0x1234, 0));
  w.end_size(m);
  EXPECT_EQ(w.data()[0], 0x12);
  EXPECT_EQ(w.data()[1], 0x34);
}

TEST(Writer, FinishHandsOverTheBytes) {
  Writer w;
  w.u32(0x11223344);
  auto out = w.finish();
  ASSERT_TRUE(out.ok()) << out.error().message();
  EXPECT_EQ(to_hex(*out), "11223344");
  EXPECT_EQ(w.size(), 0u);
}

TEST(Writer, ReaderRoundTrip) {
  Writer w;
  w.u8(7);
  w.u16(0xbeef);
  w.u32(0xcafef00d);
  w.u64(0x0123456789abcdefull);
  w.tpm2b(H("010203"), "e", 3);
  auto m = w.begin_size16("f", 2);
  w.u16(42);
  w.end_size(m);
  w.count(2, "g", 2);
  w.count8(1, "h", 1);
  auto data = w.finish();
  ASSERT_TRUE(data.ok()) << data.error().message();
  Reader r(*data);
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
  EXPECT_EQ(r.count("g", 2), 2u);
  EXPECT_EQ(r.u8("h"), 1);
  r.expect_end("all");
  EXPECT_TRUE(r.ok()) << error_of(r);
}

// ---------------------------------------------------------------------------
// Writer: every size it writes is true, or it writes nothing.

TEST(WriterLimits, Tpm2bAtItsMaxIsWritten) {
  Writer w;
  w.tpm2b(Bytes(64, 0xaa), "TPM2B_DIGEST", 64);
  ASSERT_TRUE(w.ok()) << error_of(w);
  EXPECT_EQ(w.size(), 66u);
  Writer full;
  full.tpm2b(Bytes(0xffff, 0), "big");
  ASSERT_TRUE(full.ok()) << error_of(full);
  EXPECT_EQ(full.data()[0], 0xff);
  EXPECT_EQ(full.data()[1], 0xff);
  EXPECT_EQ(full.size(), 0x10001u);
}

TEST(WriterLimits, Tpm2bOverTheCallersMax) {
  Writer w;
  w.u32(0x11111111);
  w.tpm2b(Bytes(65, 0xaa), "TPMT_PUBLIC.authPolicy", 64);
  expect_refused(w, {"TPMT_PUBLIC.authPolicy", "offset 4", "size 65", "at most 64"});
}

TEST(WriterLimits, Tpm2bOverWhatAU16CanSay) {
  // The cast to u16 would have written size 0x0000 and then 64 KiB of body.
  Writer w;
  w.tpm2b(Bytes(0x10000, 0xaa), "blob");
  expect_refused(w, {"blob", "offset 0", "size 65536", "at most 65535"});
  // A max above 0xffff does not lift the u16 bound.
  Writer w2;
  w2.tpm2b(Bytes(0x10001, 0xaa), "blob", 1 << 20);
  expect_refused(w2, {"size 65537", "at most 65535"});
}

TEST(WriterLimits, Size16RegionOverWhatAU16CanSay) {
  Writer w;
  auto mark = w.begin_size16("TPM2B_PUBLIC");
  w.bytes(Bytes(0x10000, 0));
  w.end_size(mark);
  expect_refused(w, {"TPM2B_PUBLIC", "offset 0", "size 65536", "at most 65535"});
}

TEST(WriterLimits, Size16RegionOverItsMax) {
  Writer w;
  w.u8(0);
  auto mark = w.begin_size16("TPM2B_SENSITIVE_CREATE", 4);
  w.u32(1);
  w.u8(2);
  w.end_size(mark);
  expect_refused(w, {"TPM2B_SENSITIVE_CREATE", "offset 1", "size 5", "at most 4"});
}

TEST(WriterLimits, Count8OverItsMax) {
  // sizeofSelect is a u8: 256 select bytes would have been counted as 0.
  Writer w;
  w.u16(0x000b);
  w.count8(256, "TPMS_PCR_SELECTION.sizeofSelect");
  expect_refused(w, {"TPMS_PCR_SELECTION.sizeofSelect", "offset 2", "count 256", "at most 255"});
  Writer w2;
  w2.count8(33, "TPMS_PCR_SELECTION.sizeofSelect", 32);
  expect_refused(w2, {"count 33", "at most 32"});
}

TEST(WriterLimits, Count32OverItsMax) {
  Writer w;
  w.count(17, "TPML_PCR_SELECTION.count", 16);
  expect_refused(w, {"TPML_PCR_SELECTION.count", "offset 0", "count 17", "at most 16"});
}

TEST(WriterLimits, TotalLimit) {
  Writer w(12, "command");
  w.u16(0x8001);
  w.u32(12);
  w.u32(0x17b);
  w.u16(0x20);
  ASSERT_TRUE(w.ok()) << error_of(w) << ": exactly at the limit is allowed";
  w.u8(0);
  expect_refused(w, {"command would be 13 bytes", "UINT8", "offset 12", "at most 12"});

  Writer big(4096, "command");
  big.u16(0x8001);
  big.bytes(Bytes(5000, 0), "parameters");
  expect_refused(big, {"command would be 5002 bytes", "writing parameters at offset 2", "at most 4096"});

  // A TPM2B within its own max still has to fit the buffer, size field included.
  Writer t(10, "command");
  t.bytes(Bytes(2, 0));
  t.tpm2b(Bytes(7, 0), "TPM2B_DIGEST", 64);
  expect_refused(t, {"command would be 11 bytes", "TPM2B_DIGEST", "at most 10"});
}

TEST(WriterLimits, TheFirstFailureSticksAndLaterWritesAreNoOps) {
  Writer w;
  w.u32(0xdeadbeef);
  w.tpm2b(Bytes(65, 0), "first", 64);
  std::string first = error_of(w);
  // Later writes, a later failure, size marks and a fail() change nothing.
  w.u8(1);
  w.u16(2);
  w.u32(3);
  w.u64(4);
  w.bytes(H("aabb"));
  w.tpm2b(H("aa"), "ok");
  w.count(1, "ok", 1);
  w.count8(300, "second");
  auto mark = w.begin_size16("region");
  w.u8(5);
  w.end_size(mark);
  w.fail("third");
  EXPECT_EQ(error_of(w), first);
  EXPECT_NE(first.find("first"), std::string::npos) << first;
  expect_refused(w, {"first"});
}

TEST(WriterLimits, FailureInsideASizedRegionLeavesNoPatchedPrefix) {
  Writer w;
  w.u16(0x8002);
  auto outer = w.begin_total_size32("commandSize");
  auto inner = w.begin_size16("TPM2B_PUBLIC");
  w.tpm2b(Bytes(67, 0), "TPMS_ECC_POINT.x", 66);
  w.end_size(inner);
  w.end_size(outer);
  expect_refused(w, {"TPMS_ECC_POINT.x", "offset 8", "size 67", "at most 66"});
}

TEST(WriterLimits, CallerFailure) {
  Writer w;
  w.u16(1);
  w.fail("TPMT_HA.digest has size 20, sha256 needs 32");
  expect_refused(w, {"TPMT_HA.digest has size 20, sha256 needs 32"});
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

// Appending a view of itself: the buffer grows, and the view's bytes are
// copied before the old buffer is wiped and freed (ASan would catch a read
// of the freed one).
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
