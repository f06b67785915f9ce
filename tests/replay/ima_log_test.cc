// IMA measurement logs: both renderings of every template, the PCR values they
// imply, violations, and hostile input. Logs come from tests/support/log_builder,
// whose digests are OpenSSL's own, not the parser's.
#include "tpmsec/replay/ima_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/log_builder.h"
#include "support/test_data.h"
#include "tpmsec/constants.h"

namespace tpmsec::ima {
namespace {

using testing::ima_ascii_line;
using testing::ima_ascii_log;
using testing::ima_binary_entry;
using testing::ima_binary_log;
using testing::ima_expected_pcr;
using testing::ima_template_data;
using testing::ima_violation;
using testing::ImaRecord;
using testing::put_le32;
using testing::sample_ima_record;

const std::vector<std::string> kTemplates = {"ima", "ima-ng", "ima-sig", "ima-buf"};

ByteView bytes_of(const std::string& s) { return as_bytes(s); }

// A boot-like log: boot_aggregate then files of every template.
std::vector<ImaRecord> mixed_records(int count) {
  std::vector<ImaRecord> records;
  for (int i = 0; i < count; ++i) records.push_back(sample_ima_record(kTemplates[i % kTemplates.size()], i));
  return records;
}

void expect_same_fields(const Entry& e, const ImaRecord& r) {
  EXPECT_EQ(e.pcr, r.pcr);
  EXPECT_EQ(e.template_name, r.template_name);
  EXPECT_EQ(e.file_digest, r.file_digest);
  EXPECT_EQ(e.file_digest_algorithm, r.template_name == "ima" ? "" : r.digest_algorithm);
  EXPECT_EQ(e.event_name, r.event_name);
  EXPECT_EQ(e.violation, r.violation);
  EXPECT_EQ(e.template_data, ima_template_data(r));
  if (r.template_name == "ima-sig") {
    EXPECT_EQ(e.signature, r.extra);
  }
  if (r.template_name == "ima-buf") {
    EXPECT_EQ(e.buffer, r.extra);
  }
}

class EachTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(EachTemplate, AsciiParsesAndRebuildsTheTemplateData) {
  std::vector<ImaRecord> records;
  for (int i = 0; i < 12; ++i) records.push_back(sample_ima_record(GetParam(), i));
  ParsedLog log = parse_ascii_log(ima_ascii_log(records));
  ASSERT_TRUE(log.ok()) << log.problems[0].error.message();
  EXPECT_EQ(log.format, LogFormat::kAscii);
  ASSERT_EQ(log.entries.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE(i);
    expect_same_fields(log.entries[i], records[i]);
    EXPECT_EQ(log.entries[i].line, i + 1);
  }
}

TEST_P(EachTemplate, BinaryParsesAndRebuildsTheTemplateData) {
  std::vector<ImaRecord> records;
  for (int i = 0; i < 12; ++i) records.push_back(sample_ima_record(GetParam(), i));
  Bytes binary = ima_binary_log(records);
  ParsedLog log = parse_binary_log(binary);
  ASSERT_TRUE(log.ok()) << log.problems[0].error.message();
  EXPECT_TRUE(log.complete);
  ASSERT_EQ(log.entries.size(), records.size());
  size_t offset = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    SCOPED_TRACE(i);
    expect_same_fields(log.entries[i], records[i]);
    EXPECT_EQ(log.entries[i].offset, offset);
    offset += ima_binary_entry(records[i]).size();
  }
}

TEST_P(EachTemplate, ExpectedPcrInEachBank) {
  std::vector<ImaRecord> records;
  for (int i = 0; i < 20; ++i) records.push_back(sample_ima_record(GetParam(), i));
  ParsedLog log = parse_ascii_log(ima_ascii_log(records));
  ASSERT_TRUE(log.ok());
  for (uint16_t bank : {alg::kSha1, alg::kSha256, alg::kSha384, alg::kSha512}) {
    SCOPED_TRACE(hash_name(bank));
    Result<Bytes> pcr = expected_pcr(log.entries, bank, 10);
    ASSERT_TRUE(pcr.ok()) << pcr.error().message();
    EXPECT_EQ(*pcr, ima_expected_pcr(records, bank, 10));
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, EachTemplate, ::testing::ValuesIn(kTemplates), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
});

TEST(ImaLog, AsciiLineIsTheKernelsFormat) {
  ImaRecord r = sample_ima_record("ima-sig", 3);  // unsigned: ends in an empty field
  r.pcr = 9;
  std::string line = ima_ascii_line(r);
  ASSERT_EQ(line.substr(0, 3), " 9 ");
  ASSERT_EQ(line.back(), ' ');
  ParsedLog log = parse_ascii_log(line);  // no final newline
  ASSERT_TRUE(log.ok()) << log.problems[0].error.message();
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_EQ(log.entries[0].pcr, 9u);
  EXPECT_TRUE(log.entries[0].signature.empty());
}

TEST(ImaLog, KnownTemplateDataLayout) {
  // ima-ng, sha1 file digest of 20 x 0xAB, name "/a": written out by hand.
  ImaRecord r;
  r.template_name = "ima-ng";
  r.digest_algorithm = "sha1";
  r.file_digest = Bytes(20, 0xab);
  r.event_name = "/a";
  ParsedLog log = parse_ascii_log(ima_ascii_line(r));
  ASSERT_TRUE(log.ok()) << log.problems[0].error.message();
  Bytes expected = {0x1a, 0, 0, 0, 's', 'h', 'a', '1', ':', 0};
  expected.insert(expected.end(), 20, 0xab);
  expected.insert(expected.end(), {0x03, 0, 0, 0, '/', 'a', 0});
  EXPECT_EQ(log.entries[0].template_data, expected);

  // ima: d then the name padded to 256 bytes, no lengths.
  ImaRecord old = sample_ima_record("ima", 1);
  old.event_name = "/b";
  ParsedLog log2 = parse_ascii_log(ima_ascii_line(old));
  ASSERT_TRUE(log2.ok());
  ASSERT_EQ(log2.entries[0].template_data.size(), 20u + 256u);
  EXPECT_EQ(log2.entries[0].template_data[20], '/');
  EXPECT_EQ(log2.entries[0].template_data[21], 'b');
  EXPECT_EQ(log2.entries[0].template_data[22], 0);
}

TEST(ImaLog, ViolationsExtendAllOnes) {
  std::vector<ImaRecord> records = mixed_records(6);
  records.insert(records.begin() + 2, ima_violation("ima-ng", "/etc/passwd"));
  records.push_back(ima_violation("ima", "/var/log/x"));
  for (const ParsedLog& log : {parse_ascii_log(ima_ascii_log(records)), parse_binary_log(ima_binary_log(records))}) {
    ASSERT_TRUE(log.ok()) << log.problems[0].error.message();
    ASSERT_EQ(log.entries.size(), records.size());
    EXPECT_TRUE(log.entries[2].violation);
    EXPECT_TRUE(log.entries.back().violation);
    EXPECT_FALSE(log.entries[0].violation);
    for (uint16_t bank : {alg::kSha1, alg::kSha256, alg::kSha384}) {
      Result<Bytes> digest = extend_digest(log.entries[2], bank);
      ASSERT_TRUE(digest.ok());
      EXPECT_EQ(*digest, Bytes(*digest_size(bank), 0xff));
      Result<Bytes> pcr = expected_pcr(log.entries, bank, 10);
      ASSERT_TRUE(pcr.ok());
      EXPECT_EQ(*pcr, ima_expected_pcr(records, bank, 10));
    }
  }
}

TEST(ImaLog, BinaryAndAsciiAgree) {
  std::vector<ImaRecord> records = mixed_records(200);
  records[17].pcr = 11;
  records[40] = ima_violation("ima-sig", "/tmp/y");
  ParsedLog ascii = parse_ascii_log(ima_ascii_log(records));
  ParsedLog binary = parse_binary_log(ima_binary_log(records));
  ASSERT_TRUE(ascii.ok());
  ASSERT_TRUE(binary.ok());
  ASSERT_EQ(ascii.entries.size(), binary.entries.size());
  for (size_t i = 0; i < ascii.entries.size(); ++i) {
    const Entry& a = ascii.entries[i];
    const Entry& b = binary.entries[i];
    SCOPED_TRACE(i);
    EXPECT_EQ(a.pcr, b.pcr);
    EXPECT_EQ(a.template_name, b.template_name);
    EXPECT_EQ(a.template_hash, b.template_hash);
    EXPECT_EQ(a.template_data, b.template_data);
    EXPECT_EQ(a.file_digest_algorithm, b.file_digest_algorithm);
    EXPECT_EQ(a.file_digest, b.file_digest);
    EXPECT_EQ(a.event_name, b.event_name);
    EXPECT_EQ(a.signature, b.signature);
    EXPECT_EQ(a.buffer, b.buffer);
    EXPECT_EQ(a.violation, b.violation);
  }
  for (uint16_t bank : {alg::kSha1, alg::kSha256}) {
    auto from_ascii = replay(ascii.entries, bank);
    auto from_binary = replay(binary.entries, bank);
    ASSERT_TRUE(from_ascii.ok() && from_binary.ok());
    EXPECT_EQ(*from_ascii, *from_binary);
    ASSERT_EQ(from_ascii->size(), 2u);  // PCRs 10 and 11
    EXPECT_EQ(from_ascii->at(10), ima_expected_pcr(records, bank, 10));
    EXPECT_EQ(from_ascii->at(11), ima_expected_pcr(records, bank, 11));
  }
}

TEST(ImaLog, ThousandsOfEntries) {
  std::vector<ImaRecord> records = mixed_records(5000);
  for (int i = 0; i < 5000; i += 997) records[i] = ima_violation("ima-ng", "/v" + std::to_string(i));
  std::string ascii = ima_ascii_log(records);
  Bytes binary = ima_binary_log(records);
  Result<ParsedLog> a = parse_log(bytes_of(ascii));
  Result<ParsedLog> b = parse_log(binary);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->format, LogFormat::kAscii);
  EXPECT_EQ(b->format, LogFormat::kBinary);
  ASSERT_TRUE(a->ok() && b->ok());
  ASSERT_EQ(a->entries.size(), 5000u);
  ASSERT_EQ(b->entries.size(), 5000u);
  for (uint16_t bank : {alg::kSha1, alg::kSha256}) {
    Bytes expected = ima_expected_pcr(records, bank, 10);
    EXPECT_EQ(*expected_pcr(a->entries, bank, 10), expected);
    EXPECT_EQ(*expected_pcr(b->entries, bank, 10), expected);
  }
}

TEST(ImaLog, PcrsNotExtendedAreZero) {
  std::vector<ImaRecord> records = mixed_records(3);
  ParsedLog log = parse_ascii_log(ima_ascii_log(records));
  EXPECT_EQ(*expected_pcr(log.entries, alg::kSha256, 11), Bytes(32, 0));
  EXPECT_EQ(*expected_pcr({}, alg::kSha1, 10), Bytes(20, 0));
  EXPECT_FALSE(expected_pcr(log.entries, 0x0099, 10).ok());
  EXPECT_EQ(extend_digest(log.entries[0], 0x0099).error().kind(), ErrorKind::kUnsupported);
}

// ---- malformed ascii ----

struct BadLine {
  std::string name;
  std::string line;
  std::string message;  // expected after "line 3: "
  ErrorKind kind = ErrorKind::kParse;
};
void PrintTo(const BadLine& b, std::ostream* os) { *os << b.name; }

std::vector<BadLine> bad_lines() {
  ImaRecord ng = sample_ima_record("ima-ng", 1);
  std::string good = ima_ascii_line(ng);
  std::string hash = good.substr(3, 40);
  std::string d_ng = ng.digest_algorithm + ":" + std::string(2 * ng.file_digest.size(), 'a');
  std::string ng_ok = ima_ascii_line(ng);
  std::string tampered = ng_ok;
  tampered[tampered.size() - 1] = tampered.back() == 'x' ? 'y' : 'x';  // the name changes, not the hash
  return {
      {"MissingField", "10 " + hash + " ima-ng " + d_ng, "template 'ima-ng' expects 2 fields, got 1"},
      // The name takes every column past the digest ("/x extra"): the hash
      // proves it is not the name that was measured.
      {"ExtraField", ng_ok + " extra", "template hash " + hash + " does not match", ErrorKind::kIntegrity},
      {"SigMissingField", "10 " + hash + " ima-sig " + d_ng + " /x", "template 'ima-sig' expects 3 fields, got 2"},
      {"UnknownTemplate", "10 " + hash + " ima-foo " + d_ng + " /x", "template 'ima-foo' is not supported"},
      {"TooFewColumns", "10 " + hash, "expected 'PCR template-hash template-name field…', got 2 columns"},
      {"PcrNotANumber", "1x " + hash + " ima-ng " + d_ng + " /x", "PCR '1x' is not a decimal number"},
      {"PcrTooLarge", "64 " + hash + " ima-ng " + d_ng + " /x", "PCR 64 is above 63"},
      {"ShortTemplateHash", "10 abcd ima-ng " + d_ng + " /x", "template hash 'abcd' is not 40 hex digits"},
      {"DigestWithoutAlgorithm", "10 " + hash + " ima-ng abcdef /x", "d-ng field 'abcdef' is not ALGORITHM:HEX"},
      {"DigestNotHex", "10 " + hash + " ima-ng sha1:zz /x", "d-ng field is not hex"},
      {"DigestOddHex", "10 " + hash + " ima-ng sha1:abc /x", "d-ng field is not hex"},
      {"DigestTooLong", "10 " + hash + " ima-ng sha1:" + std::string(130, 'a') + " /x", "d-ng digest is 65 bytes"},
      {"BadAlgorithmName", "10 " + hash + " ima-ng SHA$:abcd /x", "d-ng field has a bad algorithm name 'SHA$'"},
      {"ImaDigestShort", "10 " + hash + " ima abcd /x", "d field is 2 bytes, expected 20"},
      {"ImaNameTooLong", "10 " + hash + " ima " + std::string(40, 'a') + " /" + std::string(255, 'n'),
       "n field is 256 bytes, at most 255"},
      {"SigNotHex", "10 " + hash + " ima-sig " + d_ng + " /x 0x0302", "sig field is not hex"},
      {"TemplateHashMismatch", tampered, "template hash " + hash + " does not match", ErrorKind::kIntegrity},
      {"NulInName", "10 " + hash + " ima-ng " + d_ng + " /x" + std::string(1, '\0') + "y",
       "n-ng field holds a NUL byte"},
  };
}

class MalformedAsciiLine : public ::testing::TestWithParam<BadLine> {};

TEST_P(MalformedAsciiLine, IsReportedWithItsLineAndTheRestIsKept) {
  std::vector<ImaRecord> records = mixed_records(4);
  std::vector<std::string> lines;
  for (const ImaRecord& r : records) lines.push_back(ima_ascii_line(r));
  lines.insert(lines.begin() + 2, GetParam().line);  // line 3
  std::string text;
  for (const std::string& l : lines) text += l + "\n";

  ParsedLog log = parse_ascii_log(text);
  ASSERT_EQ(log.problems.size(), 1u);
  const Problem& p = log.problems[0];
  EXPECT_EQ(p.line, 3u);
  EXPECT_EQ(p.entry_index, 2u);
  EXPECT_EQ(p.offset, lines[0].size() + lines[1].size() + 2);
  EXPECT_EQ(p.error.kind(), GetParam().kind);
  std::string expected_start = "line 3: " + GetParam().message;
  EXPECT_EQ(p.error.message().substr(0, expected_start.size()), expected_start) << p.error.message();

  // --skip-bad replays the four good entries; stopping replays the first two.
  ASSERT_EQ(log.entries.size(), 4u);
  EXPECT_EQ(log.entries[2].line, 4u);
  EXPECT_EQ(log.entries_before_first_problem().size(), 2u);
  std::vector<ImaRecord> first_two(records.begin(), records.begin() + 2);
  EXPECT_EQ(*expected_pcr(log.entries_before_first_problem(), alg::kSha256, 10),
            ima_expected_pcr(first_two, alg::kSha256, 10));
  EXPECT_EQ(*expected_pcr(log.entries, alg::kSha256, 10), ima_expected_pcr(records, alg::kSha256, 10));
}

INSTANTIATE_TEST_SUITE_P(Lines, MalformedAsciiLine, ::testing::ValuesIn(bad_lines()),
                         [](const auto& info) { return info.param.name; });

// The kernel prints an event name as it is, spaces included: an unlinked
// file is "/tmp/#17634599 (deleted)" (ima_show_template_string). Such lines
// parse in every template, the name taking the columns the other fields
// leave (before an empty sig or buf too), and the entry is the one whose
// template hash the line carries (computed here by the tests' own code).
TEST(ImaLog, AsciiNamesWithSpacesAsTheKernelPrintsThem) {
  for (const std::string& t : kTemplates) {
    for (const std::string name : {"/tmp/#17634599 (deleted)", " two  spaces, and one at the end "}) {
      for (bool empty_extra : {false, true}) {
        ImaRecord r = sample_ima_record(t, 7);
        r.event_name = name;
        if (empty_extra) r.extra.clear();
        ParsedLog log = parse_ascii_log(ima_ascii_line(r) + "\n");
        ASSERT_TRUE(log.problems.empty()) << t << " '" << name << "': " << log.problems[0].error.message();
        ASSERT_EQ(log.entries.size(), 1u);
        expect_same_fields(log.entries[0], r);
        EXPECT_EQ(log.entries[0].template_hash, testing::ima_template_hash(r));
      }
    }
  }
}

TEST(ImaLog, AsciiEmptyLinesAreIgnoredAndGarbageIsNot) {
  std::vector<ImaRecord> records = mixed_records(2);
  std::string text = "\n" + ima_ascii_line(records[0]) + "\n\n" + ima_ascii_line(records[1]) + "\n\n";
  ParsedLog log = parse_ascii_log(text);
  EXPECT_TRUE(log.ok());
  ASSERT_EQ(log.entries.size(), 2u);
  EXPECT_EQ(log.entries[1].line, 4u);

  ParsedLog junk = parse_ascii_log("hello\n   \n\x01\x02\n");
  EXPECT_TRUE(junk.entries.empty());
  ASSERT_EQ(junk.problems.size(), 3u);
  EXPECT_EQ(junk.problems[2].line, 3u);
}

TEST(ImaLog, AsciiOverlongLineIsRefused) {
  ImaRecord r = sample_ima_record("ima-buf", 1);
  r.extra = Bytes(70000, 0x11);
  ParsedLog log = parse_ascii_log(ima_ascii_line(r));
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_NE(log.problems[0].error.message().find("line 1: "), std::string::npos);
}

// ---- malformed binary ----

TEST(ImaLog, BinaryTruncatedAnywhereIsRefusedAtTheRightEntry) {
  std::vector<ImaRecord> records = {sample_ima_record("ima", 1), sample_ima_record("ima-ng", 2),
                                    sample_ima_record("ima-sig", 4), sample_ima_record("ima-buf", 5)};
  std::vector<size_t> ends;
  Bytes log;
  for (const ImaRecord& r : records) {
    Bytes e = ima_binary_entry(r);
    log.insert(log.end(), e.begin(), e.end());
    ends.push_back(log.size());
  }
  for (size_t cut = 1; cut < log.size(); ++cut) {
    ParsedLog parsed = parse_binary_log(ByteView(log).first(cut));
    size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= cut) ++whole;
    ASSERT_EQ(parsed.entries.size(), whole) << "cut at " << cut;
    bool at_boundary = whole > 0 && ends[whole - 1] == cut;
    if (at_boundary) {
      EXPECT_TRUE(parsed.ok());
      continue;
    }
    ASSERT_EQ(parsed.problems.size(), 1u) << "cut at " << cut;
    EXPECT_FALSE(parsed.complete);
    EXPECT_EQ(parsed.problems[0].entry_index, whole);
    size_t start = whole == 0 ? 0 : ends[whole - 1];
    EXPECT_EQ(parsed.problems[0].offset, start);
    std::string prefix = "entry " + std::to_string(whole) + " at offset " + std::to_string(start) + ": truncated";
    EXPECT_EQ(parsed.problems[0].error.message().substr(0, prefix.size()), prefix)
        << parsed.problems[0].error.message();
  }
}

Bytes entry_header(uint32_t pcr, const std::string& name) {
  Bytes out;
  put_le32(out, pcr);
  out.insert(out.end(), 20, 0x11);
  put_le32(out, static_cast<uint32_t>(name.size()));
  out.insert(out.end(), name.begin(), name.end());
  return out;
}

TEST(ImaLog, BinaryOversizedLengthsAreRefused) {
  Bytes good = ima_binary_entry(sample_ima_record("ima-ng", 1));
  struct Case {
    std::string what;
    Bytes entry;
  };
  std::vector<Case> cases;
  {
    Bytes e = entry_header(10, "ima-ng");
    e[24] = 0;  // name length 0
    cases.push_back({"template name length 0 at offset", e});
  }
  {
    Bytes e;
    put_le32(e, 10);
    e.insert(e.end(), 20, 0x11);
    put_le32(e, 256);
    e.insert(e.end(), 256, 'a');
    cases.push_back({"template name length 256 at offset", e});
  }
  {
    Bytes e = entry_header(10, "ima-ng");
    put_le32(e, 65537);
    e.insert(e.end(), 65537, 0);
    cases.push_back({"template data length 65537 at offset", e});
  }
  {
    Bytes e = entry_header(10, "ima-ng");
    put_le32(e, 0xffffffff);
    cases.push_back({"template data length 4294967295 at offset", e});
  }
  {
    Bytes e = entry_header(10, "ima");
    e.insert(e.end(), 20, 0x22);
    put_le32(e, 300);
    e.insert(e.end(), 300, 'n');
    cases.push_back({"n field length 300 at offset", e});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Bytes log = concat({good, c.entry, good});
    ParsedLog parsed = parse_binary_log(log);
    ASSERT_EQ(parsed.entries.size(), 1u);
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_FALSE(parsed.complete);
    EXPECT_EQ(parsed.problems[0].entry_index, 1u);
    EXPECT_EQ(parsed.problems[0].offset, good.size());
    std::string prefix = "entry 1 at offset " + std::to_string(good.size()) + ": " + c.what;
    EXPECT_EQ(parsed.problems[0].error.message().substr(0, prefix.size()), prefix)
        << parsed.problems[0].error.message();
  }
}

TEST(ImaLog, BinaryBadContentIsSkippedWhenFramingHolds) {
  Bytes good = ima_binary_entry(sample_ima_record("ima-ng", 1));
  struct Case {
    std::string what;
    Bytes entry;
    ErrorKind kind = ErrorKind::kParse;
  };
  std::vector<Case> cases;
  {
    Bytes e = entry_header(10, "ima-foo");
    put_le32(e, 3);
    e.insert(e.end(), {1, 2, 3});
    cases.push_back({"template 'ima-foo' is not supported", e});
  }
  {
    Bytes e = entry_header(10, "ima\x01");
    put_le32(e, 0);
    cases.push_back({"template 'ima\\x01' is not supported", e});
  }
  {
    // ima-ng with one field only.
    Bytes e = entry_header(10, "ima-ng");
    put_le32(e, 4 + 8);
    put_le32(e, 8);
    e.insert(e.end(), {'s', 'h', 'a', '1', ':', 0, 1, 2});
    cases.push_back({"template 'ima-ng' data does not hold its 2 fields", e});
  }
  {
    // A field length running past the template data.
    Bytes e = entry_header(10, "ima-ng");
    put_le32(e, 8);
    put_le32(e, 100);
    put_le32(e, 0);
    cases.push_back({"template 'ima-ng' data does not hold its 2 fields", e});
  }
  {
    // n-ng without its NUL.
    Bytes data;
    put_le32(data, 8);
    data.insert(data.end(), {'s', 'h', 'a', '1', ':', 0, 1, 2});
    put_le32(data, 2);
    data.insert(data.end(), {'/', 'x'});
    Bytes e = entry_header(10, "ima-ng");
    put_le32(e, static_cast<uint32_t>(data.size()));
    e.insert(e.end(), data.begin(), data.end());
    cases.push_back({"n-ng field does not end with NUL", e});
  }
  {
    Bytes e = entry_header(99, "ima-ng");
    put_le32(e, 0);
    cases.push_back({"PCR 99 is above 63", e});
  }
  {
    Bytes e = ima_binary_entry(sample_ima_record("ima-sig", 2));
    e[5] ^= 1;  // the template hash
    cases.push_back({"template hash", e, ErrorKind::kIntegrity});
  }
  {
    Bytes e = ima_binary_entry(sample_ima_record("ima", 2));
    e.back() ^= 0x20;  // the name
    cases.push_back({"template hash", e, ErrorKind::kIntegrity});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Bytes log = concat({good, c.entry, good});
    ParsedLog parsed = parse_binary_log(log);
    EXPECT_TRUE(parsed.complete);
    ASSERT_EQ(parsed.entries.size(), 2u);
    EXPECT_EQ(parsed.entries[1].offset, good.size() + c.entry.size());
    ASSERT_EQ(parsed.problems.size(), 1u);
    EXPECT_EQ(parsed.problems[0].entry_index, 1u);
    EXPECT_EQ(parsed.problems[0].error.kind(), c.kind);
    std::string prefix = "entry 1 at offset " + std::to_string(good.size()) + ": " + c.what;
    EXPECT_EQ(parsed.problems[0].error.message().substr(0, prefix.size()), prefix)
        << parsed.problems[0].error.message();
    EXPECT_EQ(parsed.entries_before_first_problem().size(), 1u);
  }
}

TEST(ImaLog, DetectsTheFormat) {
  std::vector<ImaRecord> records = mixed_records(3);
  std::string ascii = ima_ascii_log(records);
  Bytes binary = ima_binary_log(records);
  EXPECT_EQ(detect_format(bytes_of(ascii)), LogFormat::kAscii);
  EXPECT_EQ(detect_format(binary), LogFormat::kBinary);
  EXPECT_EQ(detect_format(bytes_of("hello world\n")), std::nullopt);
  EXPECT_EQ(detect_format({}), std::nullopt);
  EXPECT_EQ(detect_format(Bytes(100, 0xff)), std::nullopt);

  Result<ParsedLog> garbage = parse_log(bytes_of("not a log"));
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.error().kind(), ErrorKind::kParse);
  EXPECT_FALSE(parse_log({}).ok());
}

// ------------------------------------------------------------ per-bank lists

// ascii_runtime_measurements_<bank> and binary_runtime_measurements_<bank>
// (Linux 6.10+, ima_fs.c): the template-hash column is the bank's digest of
// the template data. Every bank the kernel writes, named by the file and not.
TEST(ImaLog, PerBankListsOfEveryBank) {
  for (uint16_t bank : {alg::kSha1, alg::kSha256, alg::kSha384, alg::kSha512, alg::kSm3_256}) {
    SCOPED_TRACE(std::string(hash_name(bank)));
    std::vector<ImaRecord> records = mixed_records(9);
    records.push_back(ima_violation("ima-ng", "/tmp/violated"));
    for (ImaRecord& r : records) r.hash_bank = bank;
    const std::string ascii = ima_ascii_log(records);
    const Bytes binary = ima_binary_log(records);
    // sm3_256 and sha256 hashes are the same size: an sm3 list is named.
    std::vector<std::optional<uint16_t>> namings = {bank};
    if (bank != alg::kSm3_256) namings.push_back(std::nullopt);
    for (std::optional<uint16_t> named : namings) {
      for (const ParsedLog& log : {parse_ascii_log(ascii, named), parse_binary_log(binary, named)}) {
        ASSERT_TRUE(log.ok()) << log.problems[0].error.message();
        ASSERT_EQ(log.entries.size(), records.size());
        EXPECT_EQ(log.hash_bank, bank);
        EXPECT_FALSE(log.tail.has_value());
        EXPECT_TRUE(log.entries.back().violation);
        EXPECT_EQ(log.entries[3].template_hash.size(), *digest_size(bank));
        for (uint16_t pcr_bank : {alg::kSha1, alg::kSha256}) {
          auto pcrs = replay(log.entries, pcr_bank);
          ASSERT_TRUE(pcrs.ok());
          EXPECT_EQ(pcrs->at(10), ima_expected_pcr(records, pcr_bank, 10));
        }
      }
    }
    // Read as another bank of the same size, every hash is wrong.
    if (bank == alg::kSm3_256) {
      ParsedLog wrong = parse_ascii_log(ascii, alg::kSha256);
      EXPECT_EQ(wrong.problems.size(), records.size() - 1);  // the violation has no hash to check
      EXPECT_EQ(wrong.problems[0].error.kind(), ErrorKind::kIntegrity);
    }
  }
}

TEST(ImaLog, BankFromTheFileName) {
  EXPECT_EQ(bank_from_file_name("/sys/kernel/security/ima/ascii_runtime_measurements_sha256"), alg::kSha256);
  EXPECT_EQ(bank_from_file_name("binary_runtime_measurements_sha384"), alg::kSha384);
  EXPECT_EQ(bank_from_file_name("/x/ascii_runtime_measurements_sha1"), alg::kSha1);
  EXPECT_EQ(bank_from_file_name("ascii_runtime_measurements_sha512"), alg::kSha512);
  EXPECT_EQ(bank_from_file_name("binary_runtime_measurements_sm3"), alg::kSm3_256);  // hash_algo_name[]
  EXPECT_EQ(bank_from_file_name("ascii_runtime_measurements_sm3_256"), alg::kSm3_256);
  EXPECT_EQ(bank_from_file_name("ascii_runtime_measurements_tpm_alg_b"), alg::kSha256);
  EXPECT_EQ(bank_from_file_name("/sys/kernel/security/ima/ascii_runtime_measurements"), std::nullopt);
  EXPECT_EQ(bank_from_file_name("ascii_runtime_measurements_md5"), std::nullopt);
  EXPECT_EQ(bank_from_file_name("ascii_runtime_measurements_tpm_alg_zz"), std::nullopt);
  EXPECT_EQ(bank_from_file_name("my_ascii_runtime_measurements_sha256"), std::nullopt);
}

TEST(ImaLog, AsciiHashColumnOfNoBankSizeIsRefused) {
  ImaRecord r = sample_ima_record("ima-ng", 1);
  std::string line = ima_ascii_line(r);
  line.insert(line.find(' ', 1) + 1, "ab");  // 42 hex digits
  ParsedLog log = parse_ascii_log(line + "\n");
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_NE(log.problems[0].error.message().find("not 40, 64, 96 or 128 hex digits"), std::string::npos)
      << log.problems[0].error.message();
  // Once the first line set the bank, another size is wrong for it.
  ImaRecord wide = sample_ima_record("ima-ng", 2);
  wide.hash_bank = alg::kSha256;
  ParsedLog mixed = parse_ascii_log(ima_ascii_log({sample_ima_record("ima-ng", 3), wide}));
  ASSERT_EQ(mixed.entries.size(), 1u);
  ASSERT_EQ(mixed.problems.size(), 1u);
  EXPECT_NE(mixed.problems[0].error.message().find("is not 40 hex digits (sha1)"), std::string::npos)
      << mixed.problems[0].error.message();
}

// ------------------------------------------------------------ a partial tail

// A list read while the kernel appended, or copied with a stray newline:
// whole entries, then a partial one that `tail` names.
TEST(ImaLog, BinaryPartialTailIsNamed) {
  std::vector<ImaRecord> records = mixed_records(4);
  Bytes log = ima_binary_log(records);
  const size_t whole = log.size();
  Bytes newline = log;
  newline.push_back('\n');
  ParsedLog parsed = parse_binary_log(newline);
  EXPECT_EQ(parsed.entries.size(), 4u);
  ASSERT_TRUE(parsed.tail.has_value());
  EXPECT_EQ(parsed.tail->offset, whole);
  EXPECT_EQ(parsed.tail->bytes, 1u);
  ASSERT_EQ(parsed.problems.size(), 1u);  // still a problem for callers that ignore the tail
  // A cut-off fifth entry.
  Bytes fifth = ima_binary_entry(sample_ima_record("ima-sig", 9));
  Bytes cut = log;
  cut.insert(cut.end(), fifth.begin(), fifth.begin() + 30);
  parsed = parse_binary_log(cut);
  EXPECT_EQ(parsed.entries.size(), 4u);
  ASSERT_TRUE(parsed.tail.has_value());
  EXPECT_EQ(parsed.tail->offset, whole);
  EXPECT_EQ(parsed.tail->bytes, 30u);
  // An impossible length is no tail: the input did not end there.
  Bytes bad = log;
  put_le32(bad, 10);
  bad.insert(bad.end(), 20, 0);
  put_le32(bad, 100000);  // template name length
  bad.insert(bad.end(), 8, 'x');
  parsed = parse_binary_log(bad);
  EXPECT_FALSE(parsed.tail.has_value());
  EXPECT_FALSE(parsed.complete);
}

TEST(ImaLog, AsciiPartialTailIsNamed) {
  std::vector<ImaRecord> records = mixed_records(4);
  std::string text = ima_ascii_log(records);
  const size_t whole = text.size();
  std::string fifth = ima_ascii_line(sample_ima_record("ima-ng", 9));
  ParsedLog parsed = parse_ascii_log(text + fifth.substr(0, fifth.size() - 5));
  EXPECT_EQ(parsed.entries.size(), 4u);
  ASSERT_TRUE(parsed.tail.has_value());
  EXPECT_EQ(parsed.tail->offset, whole);
  EXPECT_EQ(parsed.tail->bytes, fifth.size() - 5);
  // A bad line that ends in its newline is a bad entry, not a tail.
  parsed = parse_ascii_log(text + fifth.substr(0, fifth.size() - 5) + "\n");
  EXPECT_FALSE(parsed.tail.has_value());
  EXPECT_EQ(parsed.problems.size(), 1u);
}

// Real binary lists (tpm2-tss's test data, tests/data/logs/README.md). All
// of them end in a partial entry, as a list read while the kernel appended or
// saved with a stray newline does: a "\n" after the last entry, 6 bytes of
// the next one, or (the violation list) its only entry one byte short. Every
// whole entry parses and its template hash checks; the tail is named and
// nothing else is wrong.
TEST(ImaLog, RealBinaryListsAndTheirTails) {
  struct Case {
    const char* name;
    size_t entries;
    std::optional<Tail> tail;
  };
  for (const Case& c : std::vector<Case>{{"sml-ima-sha1.bin", 12, Tail{916, 1}},
                                         {"sml-ima-ng-sha1.bin", 6, Tail{558, 1}},
                                         {"sml-ima-sig-sha256.bin", 9, Tail{987, 6}},
                                         {"sml-ima-ng-sha1-invalidated.bin", 0, Tail{0, 86}}}) {
    SCOPED_TRACE(c.name);
    std::string content = testing::slurp(std::string(TPMSEC_TEST_DATA) + "/logs/" + c.name);
    ASSERT_FALSE(content.empty());
    Result<ParsedLog> log = parse_log(as_bytes(content));
    ASSERT_TRUE(log.ok()) << log.error().message();
    EXPECT_EQ(log->format, LogFormat::kBinary);
    EXPECT_EQ(log->hash_bank, alg::kSha1);
    EXPECT_EQ(log->entries.size(), c.entries);
    EXPECT_EQ(log->problems.size(), c.tail ? 1u : 0u);
    ASSERT_EQ(log->tail.has_value(), c.tail.has_value());
    if (c.tail) {
      EXPECT_EQ(log->tail->offset, c.tail->offset);
      EXPECT_EQ(log->tail->bytes, c.tail->bytes);
      EXPECT_EQ(c.tail->offset + c.tail->bytes, content.size());
    }
    if (c.entries > 0) EXPECT_EQ(log->entries[0].event_name, "boot_aggregate");
  }
  // The violation list's entry lacks the NUL of its name, the last byte:
  // with it, it is a whole violation in PCR 13.
  std::string invalidated = testing::slurp(std::string(TPMSEC_TEST_DATA) + "/logs/sml-ima-ng-sha1-invalidated.bin");
  Result<ParsedLog> v = parse_log(as_bytes(invalidated + std::string(1, '\0')));
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(v->ok()) << v->problems[0].error.message();
  EXPECT_TRUE(v->entries[0].violation);
  EXPECT_EQ(v->entries[0].pcr, 13u);
}

}  // namespace
}  // namespace tpmsec::ima
