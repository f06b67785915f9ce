// The TCG crypto-agile event log: parsing, the PCR values it implies (checked
// against OpenSSL and, when installed, tpm2_eventlog), and hostile input.
#include "tpmsec/replay/event_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/test_data.h"
#include "tpmsec/constants.h"

namespace tpmsec::event_log {
namespace {

using testing::EventLogBuilder;
using testing::openssl_digest;
using testing::openssl_extend;
using testing::put_le16;
using testing::put_le32;

constexpr uint32_t kEvPostCode = 0x1;
constexpr uint32_t kEvSeparator = 0x4;
constexpr uint32_t kEvSCrtmVersion = 0x8;
constexpr uint32_t kEvIpl = 0xd;
constexpr uint32_t kEvEfiAction = 0x80000007;

ByteView text(const char* s) { return as_bytes(std::string_view(s)); }

// A firmware-like log over `banks`: separators in PCRs 0-7, some actions.
EventLogBuilder firmware_log(std::vector<uint16_t> banks, bool locality) {
  EventLogBuilder b(std::move(banks));
  if (locality) b.startup_locality(3);
  b.measure(0, kEvSCrtmVersion, text("1.0"));
  b.measure(0, kEvPostCode, text("POST CODE"));
  b.measure(4, kEvEfiAction, text("Calling EFI Application from Boot Option"));
  for (uint32_t pcr = 0; pcr < 8; ++pcr) b.measure(pcr, kEvSeparator, Bytes(4, 0));
  b.measure(14, kEvIpl, text("grub_cmd linux /vmlinuz"));
  b.measure(9, kEvIpl, text("/boot/initrd.img"));
  return b;
}

TEST(EventLog, ParsesTheSpecIdEventAndEveryEvent) {
  EventLogBuilder b = firmware_log({alg::kSha1, alg::kSha256}, true);
  Result<EventLog> log = parse_event_log(b.bytes());
  ASSERT_TRUE(log.ok()) << log.error().message();
  EXPECT_EQ(log->spec_id.spec_version_major, 2);
  EXPECT_EQ(log->spec_id.uintn_size, 2);
  ASSERT_EQ(log->spec_id.algorithms.size(), 2u);
  EXPECT_EQ(log->spec_id.algorithms[1].algorithm, alg::kSha256);
  EXPECT_EQ(log->spec_id.algorithms[1].digest_size, 32);
  EXPECT_EQ(log->banks(), (std::vector<uint16_t>{alg::kSha1, alg::kSha256}));
  EXPECT_EQ(log->startup_locality, 3);

  ASSERT_EQ(log->events.size(), 14u);  // locality + 13 measured
  const Event& e = log->events[1];
  EXPECT_EQ(e.index, 2u);
  EXPECT_EQ(e.offset, b.event_offset(2));
  EXPECT_EQ(e.pcr, 0u);
  EXPECT_EQ(e.event_type, kEvSCrtmVersion);
  EXPECT_EQ(e.data, Bytes({'1', '.', '0'}));
  ASSERT_NE(e.digest_for(alg::kSha256), nullptr);
  EXPECT_EQ(*e.digest_for(alg::kSha256), openssl_digest(alg::kSha256, text("1.0")));
  EXPECT_EQ(e.digest_for(alg::kSha384), nullptr);
  EXPECT_EQ(log->events[0].event_type, kEvNoAction);
}

TEST(EventLog, ReplayMatchesOpenSsl) {
  for (bool locality : {false, true}) {
    SCOPED_TRACE(locality ? "with StartupLocality" : "without");
    std::vector<uint16_t> banks = {alg::kSha1, alg::kSha256, alg::kSha384, alg::kSha512};
    EventLogBuilder b = firmware_log(banks, locality);
    // An EV_NO_ACTION event that is not StartupLocality: never extended.
    std::vector<std::pair<uint16_t, Bytes>> zeros;
    for (uint16_t bank : banks) zeros.emplace_back(bank, Bytes(*digest_size(bank), 0));
    b.raw_event(5, kEvNoAction, zeros, text("NvIndexInstance"));
    Result<EventLog> log = parse_event_log(b.bytes());
    ASSERT_TRUE(log.ok()) << log.error().message();
    for (uint16_t bank : banks) {
      SCOPED_TRACE(hash_name(bank));
      Result<std::map<uint32_t, Bytes>> pcrs = replay_event_log(*log, bank);
      ASSERT_TRUE(pcrs.ok()) << pcrs.error().message();
      EXPECT_EQ(*pcrs, b.expected_pcrs(bank));
      EXPECT_EQ(pcrs->size(), 10u);  // 0-7, 9, 14
    }
  }
}

TEST(EventLog, StartupLocalityAloneSetsPcr0) {
  EventLogBuilder b({alg::kSha256});
  b.startup_locality(4);
  b.measure(7, kEvSeparator, Bytes(4, 0));
  Result<EventLog> log = parse_event_log(b.bytes());
  ASSERT_TRUE(log.ok()) << log.error().message();
  auto pcrs = replay_event_log(*log, alg::kSha256);
  ASSERT_TRUE(pcrs.ok());
  Bytes initial(32, 0);
  initial.back() = 4;
  EXPECT_EQ(pcrs->at(0), initial);
  EXPECT_EQ(pcrs->at(7),
            testing::openssl_extend(alg::kSha256, Bytes(32, 0), openssl_digest(alg::kSha256, Bytes(4, 0))));
}

TEST(EventLog, HeaderOnlyLogHasNoPcrs) {
  EventLogBuilder b({alg::kSha256});
  Result<EventLog> log = parse_event_log(b.bytes());
  ASSERT_TRUE(log.ok()) << log.error().message();
  EXPECT_TRUE(log->events.empty());
  EXPECT_TRUE(replay_event_log(*log, alg::kSha256)->empty());
}

TEST(EventLog, TruncatedAnywhereIsRefusedWithTheEvent) {
  EventLogBuilder b = firmware_log({alg::kSha1, alg::kSha256}, true);
  Bytes log = b.bytes();
  std::vector<size_t> starts;  // event i starts at starts[i]
  for (size_t i = 0; i <= 14; ++i) starts.push_back(b.event_offset(i));
  starts.push_back(log.size());
  for (size_t cut = 0; cut < log.size(); ++cut) {
    Result<EventLog> parsed = parse_event_log(ByteView(log).first(cut));
    size_t event = 0;
    while (starts[event + 1] <= cut) ++event;
    if (event > 0 && starts[event] == cut) {
      ASSERT_TRUE(parsed.ok()) << "cut at " << cut << ": " << parsed.error().message();
      EXPECT_EQ(parsed->events.size(), event - 1);
      continue;
    }
    ASSERT_FALSE(parsed.ok()) << "cut at " << cut;
    EXPECT_EQ(parsed.error().kind(), ErrorKind::kParse);
    std::string prefix = "event " + std::to_string(event) + " at offset " + std::to_string(starts[event]) + ": ";
    EXPECT_EQ(parsed.error().message().substr(0, prefix.size()), prefix) << parsed.error().message();
    EXPECT_NE(parsed.error().message().find("truncated"), std::string::npos) << parsed.error().message();
  }
}

// A log of `header` then one event, to test what the event may hold.
Bytes with_event(const Bytes& header, uint32_t pcr, uint32_t type,
                 const std::vector<std::pair<uint16_t, Bytes>>& digests, uint32_t size, ByteView data = {}) {
  Bytes out = header;
  put_le32(out, pcr);
  put_le32(out, type);
  put_le32(out, static_cast<uint32_t>(digests.size()));
  for (const auto& [alg, digest] : digests) {
    put_le16(out, alg);
    out.insert(out.end(), digest.begin(), digest.end());
  }
  put_le32(out, size);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

struct Malformed {
  std::string name;
  Bytes log;
  std::string message;  // a part of the error message
  ErrorKind kind = ErrorKind::kParse;
};
void PrintTo(const Malformed& m, std::ostream* os) { *os << m.name; }

std::vector<Malformed> malformed_logs() {
  std::vector<Malformed> cases;
  Bytes header = EventLogBuilder::spec_id_event({{alg::kSha1, 20}, {alg::kSha256, 32}});
  std::vector<std::pair<uint16_t, Bytes>> good_digests = {{alg::kSha1, Bytes(20, 1)}, {alg::kSha256, Bytes(32, 2)}};
  size_t event1 = header.size();

  cases.push_back({"Empty", {}, "event 0 at offset 0: truncated pcrIndex"});
  {
    Bytes bad = header;
    bad[32] = 'X';
    cases.push_back({"BadSignature", bad, "event 0 at offset 0: the first event is not a Spec ID event"});
  }
  {
    Bytes bad = header;
    bad[0] = 1;  // pcrIndex of an EV_NO_ACTION Spec ID event
    cases.push_back({"SpecIdNotPcr0", bad, "not the Spec ID event (PCR 0, EV_NO_ACTION)"});
  }
  cases.push_back(
      {"NoAlgorithms", EventLogBuilder::spec_id_event({}), "numberOfAlgorithms 0 at offset 56 is not 1 to 16"});
  {
    std::vector<std::pair<uint16_t, uint16_t>> many;
    for (uint16_t i = 0; i < 17; ++i) many.emplace_back(0x100 + i, 32);
    cases.push_back({"TooManyAlgorithms", EventLogBuilder::spec_id_event(many), "numberOfAlgorithms 17"});
  }
  cases.push_back({"WrongDigestSize", EventLogBuilder::spec_id_event({{alg::kSha256, 31}}),
                   "digestSize 31 at offset 60 for sha256 should be 32"});
  cases.push_back({"HugeDigestSize", EventLogBuilder::spec_id_event({{0x0100, 65}}), "digestSize 65"});
  cases.push_back({"DuplicateAlgorithm", EventLogBuilder::spec_id_event({{alg::kSha1, 20}, {alg::kSha1, 20}}),
                   "algorithm 0x0004 at offset 64 is listed twice"});
  {
    Bytes bad = header;
    bad[28] += 1;  // eventSize one more than the Spec ID event: a trailing byte
    bad.push_back(0);
    // Read as tpm2_eventlog reads it: the next event starts after vendorInfo,
    // at the stray byte, which is no event.
    cases.push_back({"SpecIdTrailingByte", bad, "event 1 at offset " + std::to_string(event1) + ": truncated"});
  }
  {
    Bytes bad = header;
    bad[28] = 0x00;
    bad[29] = 0x20;  // 8 KiB
    cases.push_back({"SpecIdTooLarge", bad, "eventSize 8192 at offset 28 is above 4096"});
  }
  cases.push_back({"UnlistedAlgorithm", with_event(header, 0, kEvSeparator, {{alg::kSha384, Bytes(48, 0)}}, 0),
                   "event 1 at offset " + std::to_string(event1) + ": hashAlg 0x000c at offset " +
                       std::to_string(event1 + 12) + " is not in the Spec ID event"});
  cases.push_back({"RepeatedAlgorithm",
                   with_event(header, 0, kEvSeparator, {{alg::kSha1, Bytes(20, 0)}, {alg::kSha1, Bytes(20, 0)}}, 0),
                   "appears twice"});
  {
    auto three = good_digests;
    three.emplace_back(alg::kSha1, Bytes(20, 0));
    cases.push_back(
        {"TooManyDigests", with_event(header, 0, kEvSeparator, three, 0),
         "digest count 3 at offset " + std::to_string(event1 + 8) + " is above the Spec ID event's 2 algorithms"});
  }
  cases.push_back(
      {"HugeEventSize", with_event(header, 0, kEvSeparator, good_digests, 16 * 1024 * 1024 + 1), "eventSize 16777217"});
  cases.push_back({"EventSizePastTheEnd", with_event(header, 0, kEvSeparator, good_digests, 100, Bytes(10, 0)),
                   "truncated event data"});
  cases.push_back({"PcrOutOfRange", with_event(header, 32, kEvSeparator, good_digests, 0), "PCR 32 is above 31"});
  {
    ByteView signature = text("StartupLocality");
    Bytes locality(signature.begin(), signature.end());
    locality.push_back(0);
    locality.push_back(3);
    Bytes extended = with_event(header, 0, kEvSeparator, good_digests, 0);
    cases.push_back(
        {"LocalityAfterPcr0",
         with_event(extended, 0, kEvNoAction, good_digests, static_cast<uint32_t>(locality.size()), locality),
         "StartupLocality event after PCR 0 was extended"});
    Bytes once = with_event(header, 0, kEvNoAction, good_digests, static_cast<uint32_t>(locality.size()), locality);
    cases.push_back({"LocalityTwice",
                     with_event(once, 0, kEvNoAction, good_digests, static_cast<uint32_t>(locality.size()), locality),
                     "a second StartupLocality event"});
    Bytes longer = locality;
    longer.push_back(0);
    cases.push_back({"LocalityWrongSize",
                     with_event(header, 0, kEvNoAction, good_digests, static_cast<uint32_t>(longer.size()), longer),
                     "StartupLocality event is 18 bytes, expected 17"});
    cases.push_back({"LocalityNotPcr0",
                     with_event(header, 3, kEvNoAction, good_digests, static_cast<uint32_t>(locality.size()), locality),
                     "StartupLocality event names PCR 3"});
  }
  return cases;
}

class MalformedEventLog : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedEventLog, IsRefused) {
  Result<EventLog> log = parse_event_log(GetParam().log);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.error().kind(), GetParam().kind) << log.error().message();
  EXPECT_NE(log.error().message().find(GetParam().message), std::string::npos) << log.error().message();
}

INSTANTIATE_TEST_SUITE_P(Logs, MalformedEventLog, ::testing::ValuesIn(malformed_logs()),
                         [](const auto& info) { return info.param.name; });

TEST(EventLog, ReplayNeedsTheBank) {
  EventLogBuilder b({alg::kSha1, alg::kSha256});
  b.raw_event(7, kEvSeparator, {{alg::kSha1, Bytes(20, 0)}}, Bytes(4, 0));  // no sha256 digest
  Result<EventLog> log = parse_event_log(b.bytes());
  ASSERT_TRUE(log.ok()) << log.error().message();
  EXPECT_TRUE(replay_event_log(*log, alg::kSha1).ok());
  Result<std::map<uint32_t, Bytes>> sha256 = replay_event_log(*log, alg::kSha256);
  ASSERT_FALSE(sha256.ok());
  EXPECT_EQ(sha256.error().message(),
            "event 1 at offset " + std::to_string(b.event_offset(1)) + " has no sha256 digest");
  Result<std::map<uint32_t, Bytes>> sha384 = replay_event_log(*log, alg::kSha384);
  ASSERT_FALSE(sha384.ok());
  EXPECT_EQ(sha384.error().kind(), ErrorKind::kUnsupported);
}

// "pcrs:" section of tpm2_eventlog's YAML: bank -> pcr -> value.
std::map<std::string, std::map<uint32_t, Bytes>> tpm2_eventlog_pcrs(const std::string& yaml) {
  std::map<std::string, std::map<uint32_t, Bytes>> out;
  std::istringstream in(yaml);
  std::string line, bank;
  bool in_pcrs = false;
  while (std::getline(in, line)) {
    if (line == "pcrs:") {
      in_pcrs = true;
      continue;
    }
    if (!in_pcrs) continue;
    if (line.rfind("  ", 0) == 0 && line.rfind("    ", 0) != 0 && line.back() == ':') {
      bank = line.substr(2, line.size() - 3);
    } else if (line.rfind("    ", 0) == 0) {
      size_t colon = line.find(':');
      size_t hex = line.find("0x");
      if (colon == std::string::npos || hex == std::string::npos) continue;
      out[bank][std::stoul(line.substr(4, colon - 4))] = testing::H(line.substr(hex + 2));
    }
  }
  return out;
}

// Runs tpm2_eventlog on `log`; nullopt when it is not installed.
std::optional<std::map<std::string, std::map<uint32_t, Bytes>>> run_tpm2_eventlog(const Bytes& log) {
  char path[] = "/tmp/tpmsec-event-log-XXXXXX";
  int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  if (fd < 0) return std::map<std::string, std::map<uint32_t, Bytes>>{};
  EXPECT_EQ(::write(fd, log.data(), log.size()), static_cast<ssize_t>(log.size()));
  ::close(fd);
  testing::CommandResult run = testing::run_command({"tpm2_eventlog", path});
  ::unlink(path);
  if (run.exit_code == 127) return std::nullopt;
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return tpm2_eventlog_pcrs(run.out);
}

const std::vector<uint16_t> kCrossCheckBanks = {alg::kSha1, alg::kSha256, alg::kSha384};

TEST(EventLog, AgreesWithTpm2Eventlog) {
  EventLogBuilder b = firmware_log(kCrossCheckBanks, false);
  auto theirs = run_tpm2_eventlog(b.bytes());
  if (!theirs) GTEST_SKIP() << "tpm2_eventlog (tpm2-tools) is not installed";
  Result<EventLog> log = parse_event_log(b.bytes());
  ASSERT_TRUE(log.ok()) << log.error().message();
  for (uint16_t bank : kCrossCheckBanks) {
    SCOPED_TRACE(hash_name(bank));
    auto ours = replay_event_log(*log, bank);
    ASSERT_TRUE(ours.ok());
    ASSERT_EQ(ours->size(), 10u);
    EXPECT_EQ(*ours, (*theirs)[std::string(hash_name(bank))]);
  }
}

// With a StartupLocality event every PCR but 0 must agree. tpm2-tools 5.4 (and
// older) extends EV_NO_ACTION events and ignores the locality (tpm2-tools
// issues #3224 and #3146, fixed by PR #3242), so its PCR 0 is either ours (a
// fixed version) or exactly that known-wrong value.
TEST(EventLog, AgreesWithTpm2EventlogWithStartupLocality) {
  EventLogBuilder b = firmware_log(kCrossCheckBanks, true);
  auto theirs = run_tpm2_eventlog(b.bytes());
  if (!theirs) GTEST_SKIP() << "tpm2_eventlog (tpm2-tools) is not installed";

  // The value an old tpm2_eventlog computes: the locality event extended as if it were measured.
  EventLogBuilder old_tools(kCrossCheckBanks);
  std::vector<std::pair<uint16_t, Bytes>> zeros;
  for (uint16_t bank : kCrossCheckBanks) zeros.emplace_back(bank, Bytes(*digest_size(bank), 0));
  old_tools.raw_event(0, kEvPostCode, zeros, {});
  old_tools.measure(0, kEvSCrtmVersion, text("1.0"));
  old_tools.measure(0, kEvPostCode, text("POST CODE"));
  old_tools.measure(0, kEvSeparator, Bytes(4, 0));

  Result<EventLog> log = parse_event_log(b.bytes());
  ASSERT_TRUE(log.ok()) << log.error().message();
  for (uint16_t bank : kCrossCheckBanks) {
    SCOPED_TRACE(hash_name(bank));
    auto ours = replay_event_log(*log, bank);
    ASSERT_TRUE(ours.ok());
    std::map<uint32_t, Bytes> theirs_bank = (*theirs)[std::string(hash_name(bank))];
    ASSERT_EQ(theirs_bank.size(), ours->size());
    for (const auto& [pcr, value] : *ours) {
      if (pcr != 0) {
        EXPECT_EQ(value, theirs_bank[pcr]) << "PCR " << pcr;
      }
    }
    Bytes their_pcr0 = theirs_bank[0];
    EXPECT_TRUE(their_pcr0 == ours->at(0) || their_pcr0 == old_tools.expected_pcrs(bank).at(0));
    EXPECT_EQ(ours->at(0), b.expected_pcrs(bank).at(0));
  }
}

// ---------------------------------------------------------------- SHA-1 logs

// TCG_PCR_EVENT: u32 PCR, u32 type, SHA-1 digest, u32 size, data.
void sha1_event(Bytes& log, uint32_t pcr, uint32_t type, ByteView data, std::optional<Bytes> digest = std::nullopt) {
  put_le32(log, pcr);
  put_le32(log, type);
  Bytes d = digest ? *digest : openssl_digest(alg::kSha1, data);
  log.insert(log.end(), d.begin(), d.end());
  put_le32(log, static_cast<uint32_t>(data.size()));
  log.insert(log.end(), data.begin(), data.end());
}

// A SHA-1 firmware log as older firmware writes it, optionally opened by a
// TPM 1.2-style "Spec ID Event00" (EV_NO_ACTION, never extended).
Bytes sha1_firmware_log(bool spec_id) {
  Bytes log;
  if (spec_id) {
    Bytes spec;
    const char signature[16] = "Spec ID Event00";
    spec.insert(spec.end(), signature, signature + 16);
    put_le32(spec, 0);                      // platformClass
    spec.insert(spec.end(), {2, 1, 0, 2});  // version 1.2, errata, uintnSize
    spec.push_back(0);                      // vendorInfoSize
    sha1_event(log, 0, 3, spec, Bytes(20, 0));
  }
  sha1_event(log, 0, kEvSCrtmVersion, text("1.0"));
  sha1_event(log, 0, kEvPostCode, text("POST CODE"));
  for (uint32_t pcr = 0; pcr < 8; ++pcr) sha1_event(log, pcr, kEvSeparator, Bytes(4, 0));
  sha1_event(log, 4, kEvEfiAction, text("Calling EFI Application from Boot Option"));
  return log;
}

// The values OpenSSL computes for sha1_firmware_log, by hand.
std::map<uint32_t, Bytes> sha1_firmware_pcrs() {
  auto extend = [](const Bytes& pcr, ByteView data) {
    return openssl_digest(alg::kSha1, concat({pcr, openssl_digest(alg::kSha1, data)}));
  };
  std::map<uint32_t, Bytes> pcrs;
  for (uint32_t pcr = 0; pcr < 8; ++pcr) pcrs[pcr] = Bytes(20, 0);
  pcrs[0] = extend(extend(pcrs[0], text("1.0")), text("POST CODE"));
  for (uint32_t pcr = 0; pcr < 8; ++pcr) pcrs[pcr] = extend(pcrs[pcr], Bytes(4, 0));
  pcrs[4] = extend(pcrs[4], text("Calling EFI Application from Boot Option"));
  return pcrs;
}

TEST(Sha1EventLog, ReadsAsOneSha1BankWithOrWithoutASpecIdEvent) {
  for (bool spec_id : {false, true}) {
    SCOPED_TRACE(spec_id ? "Spec ID Event00" : "no Spec ID event");
    Result<EventLog> log = parse_event_log(sha1_firmware_log(spec_id));
    ASSERT_TRUE(log.ok()) << log.error().message();
    EXPECT_EQ(log->format, LogFormat::kSha1);
    EXPECT_EQ(log->banks(), std::vector<uint16_t>{alg::kSha1});
    EXPECT_EQ(log->events.size(), spec_id ? 12u : 11u);
    EXPECT_EQ(log->events[0].index, 0u);
    auto ours = replay_event_log(*log, alg::kSha1);
    ASSERT_TRUE(ours.ok()) << ours.error().message();
    EXPECT_EQ(*ours, sha1_firmware_pcrs());
    EXPECT_EQ(replay_event_log(*log, alg::kSha256).error().kind(), ErrorKind::kUnsupported);
  }
}

TEST(Sha1EventLog, TruncationAndHugeSizesAreRefusedWithTheEvent) {
  Bytes log = sha1_firmware_log(false);
  for (size_t cut : {size_t{1}, size_t{20}, log.size() - 1}) {
    Result<EventLog> parsed = parse_event_log(ByteView(log).first(cut));
    ASSERT_FALSE(parsed.ok()) << cut;
    EXPECT_NE(parsed.error().message().find("truncated"), std::string::npos) << parsed.error().message();
  }
  Bytes huge;
  sha1_event(huge, 0, kEvSeparator, Bytes(4, 0));
  huge[28] = 0xff;
  huge[31] = 0x7f;
  Result<EventLog> parsed = parse_event_log(huge);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message().find("event 0 at offset 0: eventSize"), std::string::npos)
      << parsed.error().message();
  Bytes high_pcr;
  sha1_event(high_pcr, 40, kEvSeparator, Bytes(4, 0));
  EXPECT_NE(parse_event_log(high_pcr).error().message().find("PCR 40 is above 31"), std::string::npos);
}

TEST(Sha1EventLog, AgreesWithTpm2Eventlog) {
  Bytes log = sha1_firmware_log(false);
  auto theirs = run_tpm2_eventlog(log);
  if (!theirs) GTEST_SKIP() << "tpm2_eventlog (tpm2-tools) is not installed";
  EXPECT_EQ((*theirs)["sha1"], sha1_firmware_pcrs());
}

// The CLI replays a SHA-1 log into the TPM's sha1 bank and checks each PCR.
TEST(Sha1EventLog, ReplaysIntoTheSha1Bank) {
  const std::string path = ::testing::TempDir() + "sha1-event-log.bin";
  {
    Bytes log = sha1_firmware_log(true);
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(log.data(), 1, log.size(), f), log.size());
    std::fclose(f);
  }
  auto r = testing::run_tpmsec({"replay", "--eventlog", path, "--bank", "sha1", "--strategy", "plain"});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  EXPECT_NE(r.out.find("TCG SHA-1 event log (TCG_PCR_EVENT), 12 events, banks sha1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("DIFFERS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(to_hex(sha1_firmware_pcrs()[4])), std::string::npos) << r.out;
  auto sha256 = testing::run_tpmsec({"replay", "--eventlog", path, "--strategy", "plain"});
  EXPECT_EQ(sha256.exit_code, 2) << testing::describe(sha256);
  EXPECT_NE(sha256.err.find("has no sha256 bank"), std::string::npos) << sha256.err;
  std::remove(path.c_str());
}

// A Spec ID event whose eventSize disagrees with its vendorInfoSize: the
// next event is read after vendorInfo, as tpm2_eventlog reads it, and the
// disagreement is noted.
TEST(EventLog, VendorInfoOverrunningEventSizeIsReadAsTpm2EventlogDoes) {
  EventLogBuilder b = firmware_log({alg::kSha1, alg::kSha256}, false);
  Bytes log = b.bytes();
  // Spec ID event: header 32 bytes, then the structure; vendorInfoSize is its
  // last byte (0). Make it 4 and insert 4 vendor bytes, leaving eventSize as is.
  const uint32_t event_size = log[28] | log[29] << 8;
  const size_t vendor_size_at = 32 + event_size - 1;
  ASSERT_EQ(log[vendor_size_at], 0);
  log[vendor_size_at] = 4;
  log.insert(log.begin() + static_cast<std::ptrdiff_t>(vendor_size_at + 1), {'t', 'p', 'm', 's'});
  Result<EventLog> parsed = parse_event_log(log);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  EXPECT_EQ(parsed->spec_id.vendor_info, (Bytes{'t', 'p', 'm', 's'}));
  EXPECT_NE(parsed->spec_id_note.find("as tpm2_eventlog does"), std::string::npos) << parsed->spec_id_note;
  auto ours = replay_event_log(*parsed, alg::kSha256);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(*ours, *replay_event_log(*parse_event_log(b.bytes()), alg::kSha256));
  auto theirs = run_tpm2_eventlog(log);
  if (!theirs) GTEST_SKIP() << "tpm2_eventlog (tpm2-tools) is not installed";
  EXPECT_EQ((*theirs)["sha256"], *ours);
}

// ------------------------------------------------------------ H-CRTM

constexpr uint32_t kEvEfiHcrtmEvent = 0x80000010;

std::string data_log(const char* name) { return std::string(TPMSEC_TEST_DATA) + "/logs/" + name; }

// A real H-CRTM log (a Hygon Dhyana machine, tpm2-tss's test data; see
// tests/data/logs/README.md): PCR 0 starts at 0…04, and the replay gives the
// machine's PCR 0 as tpm2-tss's test records it, not the value from zeros
// that tpm2_eventlog prints.
TEST(EventLog, RealHcrtmLogGivesTheMachinesPcr0) {
  std::string content = testing::slurp(data_log("binary_measurements_hcrtm.bin"));
  ASSERT_FALSE(content.empty());
  Result<EventLog> log = parse_event_log(as_bytes(content));
  ASSERT_TRUE(log.ok()) << log.error().message();
  EXPECT_TRUE(log->hcrtm);
  EXPECT_EQ(log->pcr0_locality(), 4);
  EXPECT_EQ(log->banks(), (std::vector<uint16_t>{alg::kSha1, alg::kSha256, alg::kSm3_256}));
  auto sha1 = replay_event_log(*log, alg::kSha1);
  ASSERT_TRUE(sha1.ok()) << sha1.error().message();
  EXPECT_EQ(to_hex(sha1->at(0)), "15f4e6ca457d1af6bc49511a93ba3500ad69acc5");
  // Every other PCR as tpm2_eventlog gives it (tpm2-tools 5.4: PCR 0 from zeros).
  EXPECT_EQ(to_hex(sha1->at(7)), "9ed2813ea6ef768e26127f43230444f0a25e16eb");
  auto sm3 = replay_event_log(*log, alg::kSm3_256);
  ASSERT_TRUE(sm3.ok()) << sm3.error().message();
  EXPECT_EQ(to_hex(sm3->at(7)), "217e76fa3ebf02e371a43871853e833a78d752df297375abd937d1e515e3b08e");
  auto sha256 = replay_event_log(*log, alg::kSha256);
  ASSERT_TRUE(sha256.ok());
  EXPECT_EQ(to_hex(sha256->at(7)), "f8fc7e18a97df515fbcf0f939c5f1e02698729a7d7d64335c937ef83875f33f1");
  EXPECT_NE(to_hex(sha256->at(0)), "315fc4ea6a45ffd7825e017a4dbc7272ee90a786e16908555933e49709822799");  // from zeros
}

// A real Spec ID event carrying vendorInfo (tpm2-tss's test data).
TEST(EventLog, RealSpecIdEventWithVendorInfo) {
  std::string content = testing::slurp(data_log("specid-vendordata.bin"));
  ASSERT_FALSE(content.empty());
  Result<EventLog> log = parse_event_log(as_bytes(content));
  ASSERT_TRUE(log.ok()) << log.error().message();
  EXPECT_FALSE(log->spec_id.vendor_info.empty());
  EXPECT_EQ(log->banks(), (std::vector<uint16_t>{alg::kSha1, alg::kSha256}));
  EXPECT_TRUE(log->events.empty());
}

// The H-CRTM rule on a built log, checked with OpenSSL: PCR 0 from 0…04,
// whether or not a StartupLocality event precedes (the H-CRTM wins).
TEST(EventLog, HcrtmStartsPcr0AtLocality4) {
  for (bool locality : {false, true}) {
    SCOPED_TRACE(locality ? "with StartupLocality 3" : "without");
    EventLogBuilder b({alg::kSha1, alg::kSha256});
    if (locality) b.startup_locality(3);
    b.measure(0, kEvEfiHcrtmEvent, text("HCRTM"));
    b.measure(0, kEvSCrtmVersion, text("1.0"));
    b.measure(7, kEvSeparator, Bytes(4, 0));
    Result<EventLog> log = parse_event_log(b.bytes());
    ASSERT_TRUE(log.ok()) << log.error().message();
    EXPECT_TRUE(log->hcrtm);
    for (uint16_t bank : {alg::kSha1, alg::kSha256}) {
      Bytes pcr0(*digest_size(bank), 0);
      pcr0.back() = 4;
      pcr0 = openssl_extend(bank, pcr0, openssl_digest(bank, text("HCRTM")));
      pcr0 = openssl_extend(bank, pcr0, openssl_digest(bank, text("1.0")));
      auto pcrs = replay_event_log(*log, bank);
      ASSERT_TRUE(pcrs.ok());
      EXPECT_EQ(pcrs->at(0), pcr0);
      EXPECT_EQ(pcrs->at(7), openssl_extend(bank, Bytes(*digest_size(bank), 0), openssl_digest(bank, Bytes(4, 0))));
    }
  }
}

TEST(EventLog, HcrtmAfterAPcr0ExtendIsRefused) {
  EventLogBuilder b({alg::kSha256});
  b.measure(0, kEvSCrtmVersion, text("1.0"));
  b.measure(0, kEvEfiHcrtmEvent, text("HCRTM"));
  Result<EventLog> log = parse_event_log(b.bytes());
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.error().message().find("event 2 at offset " + std::to_string(b.event_offset(2)) +
                                       ": H-CRTM event after PCR 0 was extended"),
            std::string::npos)
      << log.error().message();
  // H-CRTM in another PCR is an ordinary event.
  EventLogBuilder other({alg::kSha256});
  other.measure(1, kEvEfiHcrtmEvent, text("HCRTM"));
  Result<EventLog> elsewhere = parse_event_log(other.bytes());
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_FALSE(elsewhere->hcrtm);
}

// The CLI: PCR 0 of the H-CRTM log cannot be reproduced in a reset PCR (it
// starts at 0…04), so its row is never "match"; the log's value is shown.
// sm3_256, a bank of that log, replays through the TPM's sm3_256 bank or is
// refused naming the TPM's lack, never with a hint to give --bank sm3_256.
TEST(EventLog, CliNeverSaysMatchForAPcr0ItCannotReproduce) {
  auto r = testing::run_tpmsec(
      {"replay", "--eventlog", data_log("binary_measurements_hcrtm.bin"), "--bank", "sha1", "--strategy", "plain"});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  size_t row = r.out.find("\n0     16");
  ASSERT_NE(row, std::string::npos) << r.out;
  std::string line = r.out.substr(row + 1, r.out.find('\n', row + 1) - row - 1);
  EXPECT_EQ(line.find("match"), std::string::npos) << line;
  EXPECT_NE(line.find("chain"), std::string::npos) << line;
  EXPECT_NE(r.out.find("starts from locality 4 (H-CRTM); the log's value is 15f4e6ca457d1af6bc49511a93ba3500ad69acc5"),
            std::string::npos)
      << r.out;
  auto sm3 = testing::run_tpmsec(
      {"replay", "--eventlog", data_log("binary_measurements_hcrtm.bin"), "--bank", "sm3_256", "--strategy", "plain"});
  EXPECT_EQ(sm3.err.find("--bank sm3_256"), std::string::npos) << testing::describe(sm3);
  if (sm3.exit_code != 0) {
    EXPECT_EQ(sm3.exit_code, testing::kExitUsage) << testing::describe(sm3);
    EXPECT_NE(sm3.err.find("sm3_256"), std::string::npos) << testing::describe(sm3);
  } else {
    EXPECT_NE(sm3.out.find("217e76fa3ebf02e371a43871853e833a78d752df297375abd937d1e515e3b08e"), std::string::npos)
        << sm3.out;
  }
}

}  // namespace
}  // namespace tpmsec::event_log
