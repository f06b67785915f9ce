// tpmsec verify: a log's values against a real TPM's PCRs (the embedded
// reference TPM, its state kept across processes; swtpm for a quote made by
// tpm2-tools), against files of expected values, and against a quote's PCR
// digest. Real logs from tests/data/logs (README.md there says whence).
#include "tpmsec/replay/verify.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "support/interposer.h"
#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/swtpm_process.h"
#include "support/test_data.h"
#include "tpmsec/constants.h"
#include "tpmsec/replay/event_log.h"
#include "tpmsec/replay/ima_log.h"

namespace tpmsec::verify {
namespace {

using testing::describe;
using testing::run_tpmsec;

std::string data_log(const char* name) { return std::string(TPMSEC_TEST_DATA) + "/logs/" + name; }

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/verify-" + name; }

void write(const std::string& path, ByteView data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}
void write(const std::string& path, const std::string& text) { write(path, as_bytes(text)); }

event_log::EventLog real_log(const char* name) {
  std::string content = testing::slurp(data_log(name));
  auto log = event_log::parse_event_log(as_bytes(content));
  EXPECT_TRUE(log.ok()) << name << ": " << log.error().message();
  return log.ok() ? *log : event_log::EventLog{};
}

// The values a log implies, as tpm2_pcrread prints them.
std::string pcrread_yaml(const std::map<uint16_t, std::map<uint32_t, Bytes>>& values) {
  std::string out;
  for (const auto& [bank, pcrs] : values) {
    out += fmt::format("  {}:\n", hash_name(bank));
    for (const auto& [pcr, v] : pcrs) out += fmt::format("    {} : 0x{}\n", pcr, to_hex(v));
  }
  return out;
}

std::map<uint16_t, std::map<uint32_t, Bytes>> log_values(const event_log::EventLog& log, std::vector<uint16_t> banks) {
  std::map<uint16_t, std::map<uint32_t, Bytes>> out;
  for (uint16_t b : banks) out[b] = *event_log::replay_event_log(log, b);
  return out;
}

// ------------------------------------------------------------ files of values

TEST(ExpectedValues, ReadsTpm2PcrreadYamlAndJson) {
  const std::string a(40, 'a'), b(64, 'B');
  auto yaml =
      parse_expected_values("  sha1:\n    0 : 0x" + a + "\n    10: 0x" + a + "\r\n  sha256:\n    7 : 0x" + b + "\n");
  ASSERT_TRUE(yaml.ok()) << yaml.error().message();
  EXPECT_EQ(to_hex(yaml->at(alg::kSha1).at(10)), a);
  EXPECT_EQ(yaml->at(alg::kSha256).at(7), Bytes(32, 0xbb));
  // tpm2_eventlog's "pcrs:" section.
  auto eventlog = parse_expected_values("---\npcrs:\n  sha1:\n    0  : 0x" + a + "\n");
  ASSERT_TRUE(eventlog.ok()) << eventlog.error().message();
  auto json = parse_expected_values("{\"sha256\": {\"7\": \"0x" + b + "\", \"8\": \"" + b + "\"}}");
  ASSERT_TRUE(json.ok()) << json.error().message();
  EXPECT_EQ(json->at(alg::kSha256).size(), 2u);

  struct Bad {
    std::string text, message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"  sha1:\n    0 : 0x" + std::string(38, 'a') + "\n",
            "line 2: '" + std::string(38, 'a') + "' is not a sha1 value"},
           {"    0 : 0x" + a + "\n", "line 1: a PCR value before any bank"},
           {"  md5:\n", "line 1: 'md5' is not a PCR bank"},
           {"  sha1:\n    32 : 0x" + a + "\n", "line 2: '32' is not a PCR index 0-31"},
           {"{\"sha1\": {\"x\": \"" + a + "\"}}", "\"sha1\": 'x' is not a PCR index"},
           {"{\"sha1\": [1]}", "\"sha1\" is not an object of PCR values"},
           {"{\"sha1\": {\"1\": 5}}", "\"sha1\".\"1\" is not a hex string"},
           {"{ nope", "not a JSON object of banks"},
           {"", "no PCR values"},
       }) {
    auto r = parse_expected_values(bad.text);
    ASSERT_FALSE(r.ok()) << bad.text;
    EXPECT_EQ(r.error().kind(), ErrorKind::kParse);
    EXPECT_NE(r.error().message().find(bad.message), std::string::npos) << r.error().message();
  }
}

// ------------------------------------------------------------ comparison

TEST(Compare, NamesWhereTheValuesPart) {
  event_log::EventLog log = real_log("binary_measurements_pc_client.bin");
  auto chains = implied_values(&log, {}, alg::kSha256);
  ASSERT_TRUE(chains.ok()) << chains.error().message();
  const Implied& pcr7 = chains->at(7);
  ASSERT_GE(pcr7.steps.size(), 3u);
  ImpliedValues implied{{alg::kSha256, {{7, pcr7}}}};

  auto one = [&](const Bytes& value) {
    std::vector<PcrResult> r = compare(implied, {{alg::kSha256, {{7, value}}}});
    EXPECT_EQ(r.size(), 1u);
    return r.at(0);
  };
  EXPECT_EQ(one(pcr7.value()).verdict, Verdict::kMatch);
  // The TPM holds the first two events: the third is where they part.
  PcrResult prefix = one(pcr7.steps[1].after);
  EXPECT_EQ(prefix.verdict, Verdict::kDiffers);  // a firmware log is whole at boot
  EXPECT_EQ(prefix.covered, 2u);
  EXPECT_EQ(prefix.first_apart, pcr7.steps[2].what);
  EXPECT_NE(prefix.message.find("first 2 of"), std::string::npos) << prefix.message;
  // A value no point of the chain: the first event is named.
  PcrResult off = one(Bytes(32, 0x5a));
  EXPECT_EQ(off.verdict, Verdict::kDiffers);
  EXPECT_EQ(off.first_apart, pcr7.steps[0].what);
  EXPECT_NE(off.message.find("no point of the log's chain"), std::string::npos) << off.message;
  EXPECT_EQ(compare(implied, {}).at(0).verdict, Verdict::kNotGiven);
}

// An IMA list read after the PCR may hold entries the PCR does not yet: the
// PCR's value at an earlier entry is those entries verified, the rest named.
TEST(Compare, ImaListThatGrewAfterThePcrRead) {
  std::vector<testing::ImaRecord> records;
  for (int i = 0; i < 6; ++i) records.push_back(testing::sample_ima_record("ima-ng", i));
  ima::ParsedLog parsed = ima::parse_ascii_log(testing::ima_ascii_log(records));
  ASSERT_TRUE(parsed.ok());
  auto one_bank = implied_values(nullptr, parsed.entries, alg::kSha256);
  ASSERT_TRUE(one_bank.ok());
  ImpliedValues chains{{alg::kSha256, *one_bank}};
  Bytes after4 = testing::ima_expected_pcr({records.begin(), records.begin() + 4}, alg::kSha256, 10);
  std::vector<PcrResult> r = compare(chains, {{alg::kSha256, {{10, after4}}}});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kCovered);
  EXPECT_EQ(r[0].covered, 4u);
  EXPECT_NE(r[0].first_apart.find("IMA entry 4 (line 5"), std::string::npos) << r[0].first_apart;
  // Zeros (no entry at all) is no such point: the boot aggregate is always there.
  EXPECT_EQ(compare(chains, {{alg::kSha256, {{10, Bytes(32, 0)}}}})[0].verdict, Verdict::kDiffers);
}

// A PCR no log extends holds its reset value (TCG PC Client PTP): zeros, all
// ones for 17-22, PCR 0's locality from the log; any other value is named.
TEST(Compare, APcrNoLogExtendsMustHoldItsResetValue) {
  EXPECT_EQ(reset_value(alg::kSha256, 23, nullptr), Bytes(32, 0));
  EXPECT_EQ(reset_value(alg::kSha1, 16, nullptr), Bytes(20, 0));
  for (uint32_t pcr = 17; pcr <= 22; ++pcr) EXPECT_EQ(reset_value(alg::kSha384, pcr, nullptr), Bytes(48, 0xff));
  testing::EventLogBuilder b({alg::kSha256});
  b.startup_locality(3);
  b.measure(0, 0x80000008, as_bytes(std::string("crtm")));
  auto log = event_log::parse_event_log(b.bytes());
  ASSERT_TRUE(log.ok()) << log.error().message();
  Bytes locality3(32, 0);
  locality3.back() = 3;
  EXPECT_EQ(reset_value(alg::kSha256, 0, &*log), locality3);

  ImpliedValues implied{{alg::kSha256, *implied_values(&*log, {}, alg::kSha256)}};
  PcrValues given{{alg::kSha256, {{0, implied[alg::kSha256][0].value()}, {17, Bytes(32, 0xff)}, {23, Bytes(32, 1)}}},
                  {alg::kSha1, {{23, Bytes(20, 1)}}}};
  add_unextended(implied, given, &*log);
  EXPECT_FALSE(implied.count(alg::kSha1)) << "only the banks checked";
  std::vector<PcrResult> r = compare(implied, given);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].verdict, Verdict::kMatch);
  EXPECT_EQ(r[1].verdict, Verdict::kMatch);
  EXPECT_EQ(r[1].message, "PCR 17 sha256: match (no log extends it: its reset value)");
  EXPECT_EQ(r[2].verdict, Verdict::kDiffers);
  EXPECT_EQ(r[2].message,
            "PCR 23 sha256: DIFFERS: no log extends it, yet it is not its reset value (an extend no log records)");
}

// ------------------------------------------------------------ quotes

// TPMS_ATTEST of a quote, marshalled by hand from TPM 2.0 Part 2 §10.12.12.
Bytes attest(const std::vector<std::pair<uint16_t, std::vector<uint32_t>>>& selection, const Bytes& digest) {
  Bytes out;
  auto u16 = [&](uint16_t v) { out.push_back(uint8_t(v >> 8)), out.push_back(uint8_t(v)); };
  auto u32 = [&](uint32_t v) { u16(uint16_t(v >> 16)), u16(uint16_t(v)); };
  u32(0xff544347);                                              // TPM_GENERATED_VALUE
  u16(0x8018);                                                  // TPM_ST_ATTEST_QUOTE
  u16(34), u16(alg::kSha256), out.insert(out.end(), 32, 0x11);  // qualifiedSigner
  u16(4), out.insert(out.end(), {'n', 'o', 'n', 'c'});          // extraData
  u32(0), u32(123456);                                          // clock
  u32(7), u32(2), out.push_back(1);                             // resetCount, restartCount, safe
  u32(0x20191023), u32(0);                                      // firmwareVersion
  u32(uint32_t(selection.size()));
  for (const auto& [bank, pcrs] : selection) {
    u16(bank);
    out.push_back(3);
    Bytes select(3, 0);
    for (uint32_t p : pcrs) select[p / 8] |= uint8_t(1u << (p % 8));
    out.insert(out.end(), select.begin(), select.end());
  }
  u16(uint16_t(digest.size()));
  out.insert(out.end(), digest.begin(), digest.end());
  return out;
}

TEST(Quote, ParsesTpmsAttestAndComputesItsDigest) {
  PcrValues values{{alg::kSha256, {{0, Bytes(32, 1)}, {7, Bytes(32, 7)}}}, {alg::kSha1, {{4, Bytes(20, 4)}}}};
  Bytes concat;
  for (const Bytes* v : {&values[alg::kSha256][0], &values[alg::kSha256][7], &values[alg::kSha1][4]}) {
    concat.insert(concat.end(), v->begin(), v->end());
  }
  Bytes digest = testing::openssl_digest(alg::kSha256, concat);
  Bytes a = attest({{alg::kSha256, {0, 7}}, {alg::kSha1, {4}}}, digest);
  for (bool tpm2b : {false, true}) {
    Bytes data = a;
    if (tpm2b) data.insert(data.begin(), {uint8_t(a.size() >> 8), uint8_t(a.size())});
    auto q = parse_quote(data);
    ASSERT_TRUE(q.ok()) << q.error().message();
    EXPECT_EQ(q->reset_count, 7u);
    EXPECT_EQ(q->extra_data, (Bytes{'n', 'o', 'n', 'c'}));
    ASSERT_EQ(q->selection.banks.size(), 2u);
    EXPECT_EQ(q->pcr_digest, digest);
    auto computed = quote_pcr_digest(q->selection, values, alg::kSha256);
    ASSERT_TRUE(computed.ok());
    EXPECT_EQ(*computed, digest);
  }
  values[alg::kSha1].erase(4);
  auto missing = quote_pcr_digest(parse_quote(a)->selection, values, alg::kSha256);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("PCR 4 sha1"), std::string::npos);

  // Hostile input: every cut is refused, and so is another attestation type.
  for (size_t cut = 0; cut < a.size(); ++cut) EXPECT_FALSE(parse_quote(ByteView(a).first(cut)).ok()) << cut;
  Bytes certify = a;
  certify[5] = 0x17;  // TPM_ST_ATTEST_CERTIFY
  EXPECT_NE(parse_quote(certify).error().message().find("not a quote"), std::string::npos);
  Bytes trailing = a;
  trailing.push_back(0);
  EXPECT_FALSE(parse_quote(trailing).ok());
}

// ------------------------------------------------------------ the CLI, files

// The H-CRTM log against the machine's PCR 0 (tpm2-tss's test records it):
// a match; against the value from zeros (what tpm2_eventlog prints): exit 3.
TEST(VerifyCli, HcrtmLogAgainstExpectedValues) {
  const std::string log = data_log("binary_measurements_hcrtm.bin");
  const std::string machine = temp_path("hcrtm-machine.json");
  write(machine, "{\"sha1\": {\"0\": \"15f4e6ca457d1af6bc49511a93ba3500ad69acc5\"}}");
  auto r = run_tpmsec({"verify", "--eventlog", log, "--expected", machine});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCR 0 sha1: match"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PCR 7 sha1: not among the values given"), std::string::npos) << r.out;

  const std::string zeros = temp_path("hcrtm-zeros.yaml");
  write(zeros, "pcrs:\n  sha1:\n    0  : 0x2162942d20f3d5fbe8121fe462f5b7a5568bccd2\n");
  r = run_tpmsec({"verify", "--eventlog", log, "--expected", zeros});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("PCR 0 sha1: DIFFERS"), std::string::npos) << r.out;
}

// A real SHA-1 format log (TCG_PCR_EVENT throughout: an Intel NUC) against
// its PCRs as tpm2_eventlog (tpm2-tools 5.4) computes them independently, in
// its own "pcrs:" YAML.
TEST(VerifyCli, RealSha1LogAgainstTpm2EventlogsValues) {
  const std::string yaml = temp_path("nuc.yaml");
  write(yaml,
        "pcrs:\n  sha1:\n"
        "    0  : 0x3dcaea25dc86554d94b94aa5bc8f735a49212af8\n"
        "    1  : 0xb2a83b0ebf2f8374299a5b2bdfc31ea955ad7236\n"
        "    2  : 0xb2a83b0ebf2f8374299a5b2bdfc31ea955ad7236\n"
        "    3  : 0xb2a83b0ebf2f8374299a5b2bdfc31ea955ad7236\n"
        "    4  : 0x59955b8e6e01b21ba7ccbbdecdeaa8ae6770caa1\n"
        "    5  : 0xd8949f1020f3344daf7aa87717ae58d6498731e4\n"
        "    6  : 0xb2a83b0ebf2f8374299a5b2bdfc31ea955ad7236\n"
        "    7  : 0x9216fc0727c344b355a90a3f34f357e4362d51bb\n");
  auto r = run_tpmsec({"verify", "--eventlog", data_log("binary_measurements_nuc.bin"), "--expected", yaml});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCR 7 sha1: match (6 events)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("DIFFERS"), std::string::npos) << r.out;
}

TEST(VerifyCli, RealLogAgainstAFileOfItsValuesAndATamperedOne) {
  const std::string log = data_log("binary_measurements_pc_client.bin");
  auto values = log_values(real_log("binary_measurements_pc_client.bin"), {alg::kSha1, alg::kSha256});
  const std::string good = temp_path("pc-client.yaml");
  write(good, pcrread_yaml(values));
  auto r = run_tpmsec({"verify", "--eventlog", log, "--expected", good, "--json", temp_path("pc-client.json")});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out.find("DIFFERS"), std::string::npos) << r.out;
  values[alg::kSha256][4][0] ^= 1;
  const std::string bad = temp_path("pc-client-bad.yaml");
  write(bad, pcrread_yaml(values));
  r = run_tpmsec({"verify", "--eventlog", log, "--expected", bad});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("PCR 4 sha256: DIFFERS"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("PCR 4 sha1: DIFFERS"), std::string::npos) << r.out;

  // A PCR no log extends must hold its reset value: zeros, all ones for
  // 17-22. PCR 23 extended outside the log fails, named, unless --pcrs
  // leaves it out.
  values = log_values(real_log("binary_measurements_pc_client.bin"), {alg::kSha1, alg::kSha256});
  values[alg::kSha256][16] = Bytes(32, 0);
  values[alg::kSha256][17] = Bytes(32, 0xff);
  const std::string reset = temp_path("pc-client-reset.yaml");
  write(reset, pcrread_yaml(values));
  r = run_tpmsec({"verify", "--eventlog", log, "--expected", reset});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCRs 16-17 sha256: match (no log extends them: their reset values)"), std::string::npos)
      << r.out;
  values[alg::kSha256][23] = testing::openssl_extend(alg::kSha256, Bytes(32, 0), Bytes(32, 0xee));
  const std::string omitted = temp_path("pc-client-pcr23.yaml");
  write(omitted, pcrread_yaml(values));
  r = run_tpmsec({"verify", "--eventlog", log, "--expected", omitted});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("PCR 23 sha256: DIFFERS: no log extends it, yet it is not its reset value"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("the logs do not explain PCR 23 sha256"), std::string::npos) << r.err;
  r = run_tpmsec({"verify", "--eventlog", log, "--expected", omitted, "--pcrs", "0-22"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCR 23: not checked (--pcrs)"), std::string::npos) << r.out;
  values[alg::kSha256].erase(23);
  values[alg::kSha256][17] = Bytes(32, 0);  // 17 resets to all ones, not zeros
  write(omitted, pcrread_yaml(values));
  r = run_tpmsec({"verify", "--eventlog", log, "--expected", omitted});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("PCR 17 sha256: DIFFERS"), std::string::npos) << r.out;

  auto usage = run_tpmsec({"verify", "--eventlog", log});
  EXPECT_EQ(usage.exit_code, testing::kExitUsage) << describe(usage);
  usage = run_tpmsec({"verify", "--expected", good});
  EXPECT_EQ(usage.exit_code, testing::kExitUsage) << describe(usage);
  usage = run_tpmsec({"verify", "--eventlog", log, "--tpm", "embedded", "--unsalted"});
  EXPECT_EQ(usage.exit_code, testing::kExitUsage) << describe(usage);
  EXPECT_NE(usage.err.find("--unsalted would let an interposer forge them"), std::string::npos) << usage.err;
  for (const char* list : {"0-", "7-3", "32", "x", "0,,1"}) {
    usage = run_tpmsec({"verify", "--eventlog", log, "--expected", good, "--pcrs", list});
    EXPECT_EQ(usage.exit_code, testing::kExitUsage) << list << ": " << describe(usage);
  }
}

// An IMA list whose lines name files with spaces, as the kernel prints an
// unlinked one, in the ima and ima-ng templates: verify passes against the
// PCR the records imply and names the PCR when one entry's name is changed.
TEST(VerifyCli, ImaNamesWithSpaces) {
  std::vector<testing::ImaRecord> records;
  for (const char* t : {"ima-ng", "ima", "ima-ng"})
    records.push_back(testing::sample_ima_record(t, int(records.size())));
  records[1].event_name = "/tmp/#17634599 (deleted)";
  records[2].event_name = "/tmp/a file (deleted)";
  const std::string list = temp_path("deleted.ima");
  write(list, testing::ima_ascii_log(records));
  const std::string pcrs = temp_path("deleted.json");
  write(pcrs, fmt::format("{{\"sha256\": {{\"10\": \"{}\"}}}}",
                          to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10))));
  auto r = run_tpmsec({"verify", "--ima", list, "--expected", pcrs});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCR 10 sha256: match (3 events)"), std::string::npos) << r.out;
}

// One rule for bad input in every command that reads a log: a missing,
// unreadable or malformed file is exit 2 (usage: what was given cannot be
// used), the same in replay, verify and predict; a template hash that does
// not match its line is exit 3, and no result is printed.
TEST(VerifyCli, BadInputExitsTheSameInEveryCommand) {
  const std::string values = temp_path("bad-input-values.json");
  write(values, "{\"sha256\": {\"10\": \"" + std::string(64, '0') + "\"}}");
  auto each = [&](const std::string& list, int code, const std::string& says) {
    for (std::vector<std::string> args :
         std::vector<std::vector<std::string>>{{"replay", "--ima", list, "--strategy", "plain"},
                                               {"verify", "--ima", list, "--expected", values},
                                               {"predict", "--ima", list, "--profiles", "slb9670"}}) {
      auto r = run_tpmsec(args);
      EXPECT_EQ(r.exit_code, code) << args[0] << " " << list << ": " << describe(r);
      EXPECT_NE(r.err.find(says), std::string::npos) << args[0] << ": " << r.err;
      EXPECT_EQ(r.out.find("result"), std::string::npos) << args[0] << ": " << r.out;
      EXPECT_EQ(r.out.find("match"), std::string::npos) << args[0] << ": " << r.out;
    }
  };
  each(temp_path("no-such-list"), testing::kExitUsage, "no such file");
  each(::testing::TempDir(), testing::kExitUsage, "not a regular file");

  std::vector<testing::ImaRecord> records{testing::sample_ima_record("ima-ng", 1),
                                          testing::sample_ima_record("ima-ng", 2)};
  const std::string malformed = temp_path("malformed.ima");
  write(malformed, testing::ima_ascii_line(records[0]) + "\n10 0123 ima-ng sha256:00 /broken\n");
  each(malformed, testing::kExitUsage, malformed + ": line 2:");

  std::string forged = testing::ima_ascii_line(records[1]);
  forged[3] = forged[3] == 'a' ? 'b' : 'a';
  const std::string wrong_hash = temp_path("wrong-hash.ima");
  write(wrong_hash, testing::ima_ascii_line(records[0]) + "\n" + forged + "\n");
  each(wrong_hash, testing::kExitIntegrity, "line 2: template hash");

  // Unreadable: mode 000, run as an unprivileged user when the tests run as
  // root (root reads any file).
  const std::string unreadable = temp_path("unreadable.ima");
  write(unreadable, testing::ima_ascii_log(records));
  ASSERT_EQ(::chmod(unreadable.c_str(), 0), 0);
  std::vector<std::string> argv{TPMSEC_CLI_PATH, "verify", "--ima", unreadable, "--expected", values};
  ASSERT_EQ(::chmod(values.c_str(), 0644), 0);
  if (::geteuid() == 0)
    argv.insert(argv.begin(), {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"});
  auto r = testing::run_command(argv);
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
  EXPECT_NE(r.err.find("cannot read " + unreadable), std::string::npos) << r.err;

  // The firmware log: the same rule.
  const std::string junk = temp_path("junk.bin");
  write(junk, std::string("not an event log"));
  for (const std::string& log : {temp_path("no-such-log"), junk}) {
    auto replay = run_tpmsec({"replay", "--eventlog", log, "--strategy", "plain"});
    auto verify = run_tpmsec({"verify", "--eventlog", log, "--expected", values});
    EXPECT_EQ(replay.exit_code, testing::kExitUsage) << describe(replay);
    EXPECT_EQ(verify.exit_code, testing::kExitUsage) << describe(verify);
  }
}

// policy show offers verify as the detection option where the rule's
// decision is below prevention, and says nothing of it where it prevents.
TEST(VerifyCli, PolicyShowOffersItWherePreventionIsOverBudget) {
  const std::string below = temp_path("policy-checkpoint.toml");
  write(below, "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"all\"\nextend = \"checkpoint\"\nreason = \"rig\"\n");
  auto r = run_tpmsec({"policy", "show", "--policy", below});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("detection   prevention is over budget (the rule chose below it): `tpmsec verify"),
            std::string::npos)
      << r.out;
  const std::string prevents = temp_path("policy-resident.toml");
  write(prevents, "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"all\"\nextend = \"resident\"\nreason = \"rig\"\n");
  r = run_tpmsec({"policy", "show", "--policy", prevents});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out.find("detection"), std::string::npos) << r.out;
  // The shipped policy keeps prevention on the seed thread's SLB9670, where
  // it costs 24.36 ms per extend: over a 20 ms budget, so detection is
  // offered with each choice's TPM time for the thread's 12,313-extend boot
  // (the profile's means: 24.36, 74.14, 149.29 and 6.36 ms per extend).
  r = run_tpmsec({"policy", "show", "--emulate", "slb9670"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("detection   prevention is over budget (24.36 ms per extend at best, 20.0 ms budget)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("TPM time of a boot of 12313 extends: resident (the decision) 300 s, per-command 1838 s, "
                       "saved-context 913 s, plain extends + verify on a timer 78 s"),
            std::string::npos)
      << r.out;
  // Within budget, nothing is offered.
  r = run_tpmsec({"policy", "show", "--emulate", "slb9670", "--budget-ms", "30"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out.find("\ndetection "), std::string::npos) << r.out;
}

// ------------------------------------------------------------ the CLI, a TPM

// Extends each bank's digests of `log` into the TPM at `tpm`, PCR by PCR, in
// log order (one batch per PCR and bank), leaving out `skip_last` events of
// `short_pcr`.
void extend_log(const std::string& tpm, const event_log::EventLog& log, std::vector<uint16_t> banks,
                uint32_t short_pcr = 99, size_t skip_last = 0) {
  for (uint16_t bank : banks) {
    std::map<uint32_t, std::vector<std::string>> by_pcr;
    for (const event_log::Event& e : log.events) {
      if (e.event_type != event_log::kEvNoAction) by_pcr[e.pcr].push_back(to_hex(*e.digest_for(bank)));
    }
    for (auto& [pcr, digests] : by_pcr) {
      if (pcr == short_pcr) digests.resize(digests.size() - skip_last);
      std::string input;
      for (const std::string& d : digests) input += d + "\n";
      auto r = run_tpmsec({"pcr", "extend", std::to_string(pcr), "-", "--bank", std::string(hash_name(bank)),
                           "--strategy", "plain", "--tpm", tpm},
                          {}, &input);
      ASSERT_EQ(r.exit_code, 0) << describe(r);
    }
  }
}

// One extend of PCR `pcr` in `bank` that no log records (a digest of 0xee).
void extend_outside_the_log(const std::string& tpm, uint32_t pcr, const char* bank = "sha256") {
  auto r = run_tpmsec({"pcr", "extend", std::to_string(pcr), std::string(2 * *digest_size(*hash_from_name(bank)), 'e'),
                       "--bank", bank, "--strategy", "plain", "--tpm", tpm});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
}

std::string fresh_state_dir() {
  char tmpl[] = "/tmp/tpmsec-verify-XXXXXX";
  EXPECT_NE(::mkdtemp(tmpl), nullptr);
  return tmpl;
}

// The embedded TPM keeps its PCRs 0-15 across processes (Shutdown/Startup
// STATE): the log's events extended there, verify reads them back through
// an audited session and finds every PCR; one extra extend is exit 3 naming
// the PCR, and a TPM short of a PCR's last events names the first it lacks.
TEST(VerifyCli, AgainstTheTpmItsEventsWereExtendedInto) {
  event_log::EventLog log = real_log("binary_measurements_pc_client.bin");
  ASSERT_EQ(log.pcr0_locality(), 0);  // the embedded TPM starts PCR 0 at zeros
  const std::string dir = fresh_state_dir();
  const std::string tpm = "embedded:state=" + dir;
  ASSERT_NO_FATAL_FAILURE(extend_log(tpm, log, {alg::kSha1, alg::kSha256}));
  const std::string path = data_log("binary_measurements_pc_client.bin");
  auto r = run_tpmsec({"verify", "--eventlog", path, "--tpm", tpm});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCR 7 sha256: match"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PCR 0 sha1: match"), std::string::npos) << r.out;

  // Tamper: one extend the log does not record.
  ASSERT_NO_FATAL_FAILURE(extend_outside_the_log(tpm, 4));
  r = run_tpmsec({"verify", "--eventlog", path, "--tpm", tpm});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("PCR 4 sha256: DIFFERS: the value is no point of the log's chain"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PCR 4 sha1: match"), std::string::npos) << r.out;
  std::system(("rm -rf " + dir).c_str());

  // A TPM that never saw PCR 7's last two events.
  const std::string dir2 = fresh_state_dir();
  const std::string tpm2 = "embedded:state=" + dir2;
  ASSERT_NO_FATAL_FAILURE(extend_log(tpm2, log, {alg::kSha256}, 7, 2));
  auto chains = implied_values(&log, {}, alg::kSha256);
  ASSERT_TRUE(chains.ok());
  const Implied& pcr7 = chains->at(7);
  r = run_tpmsec({"verify", "--eventlog", path, "--tpm", tpm2, "--bank", "sha256"});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  std::string expect = fmt::format(
      "PCR 7 sha256: DIFFERS: the value holds the log's first {} of {} events and none "
      "after: they part at {}",
      pcr7.steps.size() - 2, pcr7.steps.size(), pcr7.steps[pcr7.steps.size() - 2].what);
  EXPECT_NE(r.out.find(expect), std::string::npos) << r.out << "\nexpected: " << expect;
  std::system(("rm -rf " + dir2).c_str());
}

// Every allocated bank is checked, the ones the log does not record too: the
// embedded TPM allocates sha1, sha256, sha384 and sha512 and the log records
// sha1 and sha256. An extend into sha384 PCR 4 (a bank the log never
// mentions) and into sha256 PCR 14 (a PCR it never extends) are each named;
// only --bank and --pcrs leave them out.
TEST(VerifyCli, EveryBankAndPcrOfTheTpmIsChecked) {
  event_log::EventLog log = real_log("binary_measurements_pc_client.bin");
  const std::string dir = fresh_state_dir();
  const std::string tpm = "embedded:state=" + dir;
  ASSERT_NO_FATAL_FAILURE(extend_log(tpm, log, {alg::kSha1, alg::kSha256}));
  ASSERT_NO_FATAL_FAILURE(extend_outside_the_log(tpm, 4, "sha384"));
  ASSERT_NO_FATAL_FAILURE(extend_outside_the_log(tpm, 14));
  const std::string path = data_log("binary_measurements_pc_client.bin");
  auto r = run_tpmsec({"verify", "--eventlog", path, "--tpm", tpm});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("PCR 4 sha384: DIFFERS: no log extends it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PCR 14 sha256: DIFFERS: no log extends it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PCRs 0-23 sha512: match (no log extends them: their reset values)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("the logs do not explain PCR 14 sha256, PCR 4 sha384"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the firmware log records no sha384 digests"), std::string::npos) << r.err;

  r = run_tpmsec({"verify", "--eventlog", path, "--tpm", tpm, "--pcrs", "0-13,15-23"});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_EQ(r.out.find("PCR 14 sha256"), std::string::npos) << r.out;
  r = run_tpmsec({"verify", "--eventlog", path, "--tpm", tpm, "--pcrs", "0-13,15-23", "--bank", "sha1,sha256"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCR 14: not checked (--pcrs)"), std::string::npos) << r.out;
  std::system(("rm -rf " + dir).c_str());
}

// The case on a real swtpm (libtpms): the log extends PCRs 0-7, the
// TPM's PCR 23 is extended too. Verify names PCR 23 (exit 3); PCRs 17-22
// hold all ones after swtpm's TPM2_Startup(CLEAR) and 8-16 zeros, their
// reset values, so once PCR 23 is reset every PCR matches; --pcrs leaving 23
// out passes with it extended.
TEST(VerifyCli, APcrNoLogExtendsMustHoldItsResetValue) {
  testing::SwtpmProcess swtpm;
  ASSERT_TRUE(swtpm.start()) << swtpm.error();
  event_log::EventLog log = real_log("binary_measurements_pc_client.bin");
  ASSERT_NO_FATAL_FAILURE(extend_log(swtpm.spec(), log, {alg::kSha256}));
  ASSERT_NO_FATAL_FAILURE(extend_outside_the_log(swtpm.spec(), 23));
  const std::string dir = fresh_state_dir();
  const std::vector<std::string> env{"TPMSEC_STATE_DIR=" + dir};
  std::vector<std::string> args{"verify",     "--eventlog", data_log("binary_measurements_pc_client.bin"),
                                "--bank",     "sha256",     "--tpm",
                                swtpm.spec(), "--tofu"};
  auto r = run_tpmsec(args, env);
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("PCR 23 sha256: DIFFERS: no log extends it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PCRs 8-22 sha256: match (no log extends them: their reset values)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("the logs do not explain PCR 23 sha256"), std::string::npos) << r.err;

  auto reset = run_tpmsec({"pcr", "reset", "23", "--tpm", swtpm.spec()});
  ASSERT_EQ(reset.exit_code, 0) << describe(reset);
  r = run_tpmsec(args, env);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCRs 8-23 sha256: match (no log extends them: their reset values)"), std::string::npos)
      << r.out;

  ASSERT_NO_FATAL_FAILURE(extend_outside_the_log(swtpm.spec(), 23));
  args.insert(args.end(), {"--pcrs", "0-22"});
  r = run_tpmsec(args, env);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("PCR 23: not checked (--pcrs)"), std::string::npos) << r.out;
  swtpm.stop();
  std::system(("rm -rf " + dir).c_str());
}

// The attack verify --tpm exists to catch: the TPM's PCR 4 holds an extend
// the log does not record, and an interposer on the bus rewrites that value
// in every response to the log's value, faking the match. The audited read
// refuses the rewritten response (exit 3), never printing "match".
TEST(VerifyCli, AnInterposerCannotFakeTheMatch) {
  testing::SwtpmProcess swtpm;
  ASSERT_TRUE(swtpm.start()) << swtpm.error();
  event_log::EventLog log = real_log("binary_measurements_pc_client.bin");
  ASSERT_NO_FATAL_FAILURE(extend_log(swtpm.spec(), log, {alg::kSha256}));
  ASSERT_NO_FATAL_FAILURE(extend_outside_the_log(swtpm.spec(), 4));
  const Bytes logged = event_log::replay_event_log(log, alg::kSha256)->at(4);
  const Bytes tampered = testing::openssl_extend(alg::kSha256, logged, Bytes(32, 0xee));

  testing::Interposer proxy(swtpm.port());
  ASSERT_TRUE(proxy.start().ok());
  const std::string dir = fresh_state_dir();
  const std::vector<std::string> env{"TPMSEC_STATE_DIR=" + dir};
  const std::vector<std::string> args{"verify",     "--eventlog", data_log("binary_measurements_pc_client.bin"),
                                      "--bank",     "sha256",     "--tpm",
                                      proxy.spec(), "--tofu"};
  // A genuine first use pins the salt key, and finds PCR 4 tampered.
  auto genuine = run_tpmsec(args, env);
  proxy.wait_idle();
  EXPECT_EQ(genuine.exit_code, testing::kExitIntegrity) << describe(genuine);
  EXPECT_NE(genuine.out.find("PCR 4 sha256: DIFFERS"), std::string::npos) << genuine.out;

  size_t rewritten = 0;
  proxy.set_rule([&](const testing::ProxiedCommand& c, testing::Upstream& tpm) {
    testing::Reply reply = testing::pass(c, tpm);
    if (reply.response) {
      auto at = std::search(reply.response->begin(), reply.response->end(), tampered.begin(), tampered.end());
      if (at != reply.response->end()) {
        std::copy(logged.begin(), logged.end(), at);
        ++rewritten;
      }
    }
    return reply;
  });
  auto forged = run_tpmsec(args, env);
  proxy.wait_idle();
  EXPECT_GE(rewritten, 1u);
  EXPECT_EQ(forged.exit_code, testing::kExitIntegrity) << describe(forged);
  EXPECT_EQ(forged.out.find("PCR 4 sha256: match"), std::string::npos) << forged.out;
  proxy.stop();
  swtpm.stop();
  std::system(("rm -rf " + dir).c_str());
}

// A real quote: the log's events extended into swtpm, tpm2_quote (tpm2-tools)
// quotes sha256 PCRs 0-7 and writes the TPMS_ATTEST (-m); verify checks its
// PCR digest against the log's values. Extending one more digest and quoting
// again gives exit 3.
TEST(VerifyCli, AgainstAQuoteMadeByTpm2Tools) {
  testing::SwtpmProcess swtpm;
  ASSERT_TRUE(swtpm.start()) << swtpm.error();
  event_log::EventLog log = real_log("binary_measurements_pc_client.bin");
  ASSERT_NO_FATAL_FAILURE(extend_log(swtpm.spec(), log, {alg::kSha256}));
  const std::string ak = temp_path("ak.ctx"), msg = temp_path("quote.msg"), sig = temp_path("quote.sig");
  auto tool = [&](std::vector<std::string> argv) {
    argv.push_back("-T");
    argv.push_back(swtpm.tcti());
    return testing::run_command(argv);
  };
  auto primary = tool({"tpm2_createprimary", "-Q", "-C", "o", "-G", "ecc256:ecdsa-sha256:null", "-a",
                       "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|sign", "-c", ak});
  ASSERT_EQ(primary.exit_code, 0) << describe(primary);
  auto quote = [&] {
    return tool({"tpm2_quote", "-Q", "-c", ak, "-l", "sha256:0,1,2,3,4,5,6,7", "-q", "abcd", "-m", msg, "-s", sig, "-g",
                 "sha256"});
  };
  auto q = quote();
  ASSERT_EQ(q.exit_code, 0) << describe(q);
  const std::string path = data_log("binary_measurements_pc_client.bin");
  auto r = run_tpmsec({"verify", "--eventlog", path, "--quote", msg});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("selects   sha256:0,1,2,3,4,5,6,7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": match (the log's values, hashed with sha256)"), std::string::npos) << r.out;

  ASSERT_NO_FATAL_FAILURE(extend_outside_the_log(swtpm.spec(), 5));
  q = quote();
  ASSERT_EQ(q.exit_code, 0) << describe(q);
  r = run_tpmsec({"verify", "--eventlog", path, "--quote", msg});
  EXPECT_EQ(r.exit_code, testing::kExitIntegrity) << describe(r);
  EXPECT_NE(r.out.find("DIFFERS from the log's values"), std::string::npos) << r.out;
  swtpm.stop();
}

}  // namespace
}  // namespace tpmsec::verify
