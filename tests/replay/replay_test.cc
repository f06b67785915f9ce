// tpmsec replay and predict on generated logs in the formats' exact layouts:
// the final PCR equals the value computed independently (OpenSSL, in
// tests/support/log_builder), malformed logs stop with their line number,
// and prediction matches both emulation and the seed thread's arithmetic.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/log_builder.h"
#include "support/run_command.h"
#include "tpmsec/constants.h"
#include "tpmsec/replay/event_log.h"

namespace tpmsec {
namespace {

using testing::run_tpmsec;

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/replay-" + name; }

void write(const std::string& path, ByteView data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}
void write(const std::string& path, const std::string& text) { write(path, as_bytes(text)); }

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}

// A log of `n` entries cycling through every template and file-digest
// algorithm, with a violation now and then.
std::vector<testing::ImaRecord> mixed_log(int n) {
  const char* templates[] = {"ima-ng", "ima-sig", "ima-buf", "ima", "ima-ng"};
  std::vector<testing::ImaRecord> records;
  for (int i = 0; i < n; ++i) {
    if (i % 97 == 50) {
      records.push_back(testing::ima_violation("ima-ng", fmt::format("/tmp/violated-{}", i)));
      continue;
    }
    testing::ImaRecord r = testing::sample_ima_record(templates[i % 5], i);
    if (i % 5 == 4) r.digest_algorithm = "sha1";
    if (r.digest_algorithm == "sha1" && r.template_name != "ima") r.file_digest.resize(20);
    records.push_back(r);
  }
  return records;
}

std::string pcr_of(const std::string& out) {
  size_t at = out.find("PCR 16 = ");
  if (at == std::string::npos) at = out.find("PCR 23 = ");
  if (at == std::string::npos) return {};
  return out.substr(at + 9, out.find(':', at) - at - 9);
}

TEST(ReplayIma, EveryStrategyLeavesTheValueTheLogGives) {
  auto records = mixed_log(1500);
  std::string path = temp_path("mixed.txt");
  write(path, testing::ima_ascii_log(records));
  std::string expected = to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10));
  for (const char* strategy : {"per-command", "saved-context", "resident", "plain", "checkpoint"}) {
    auto r = run_tpmsec({"replay", "--ima", path, "--strategy", strategy});
    ASSERT_EQ(r.exit_code, 0) << strategy << ": " << r.err;
    EXPECT_EQ(pcr_of(r.out), expected) << strategy << "\n" << r.out;
    EXPECT_NE(r.out.find("equal to the value computed from the log"), std::string::npos);
    EXPECT_NE(r.out.find("1500 good entries"), std::string::npos) << r.out;
  }
}

TEST(ReplayIma, BinaryLogAndOtherBanks) {
  auto records = mixed_log(400);
  std::string bin = temp_path("mixed.bin");
  write(bin, testing::ima_binary_log(records));
  for (auto [bank, alg_id] :
       {std::pair{"sha256", alg::kSha256}, std::pair{"sha1", alg::kSha1}, std::pair{"sha384", alg::kSha384}}) {
    auto r = run_tpmsec({"replay", "--ima", bin, "--strategy", "resident", "--bank", bank, "--pcr", "23"});
    ASSERT_EQ(r.exit_code, 0) << bank << ": " << r.err;
    EXPECT_NE(r.out.find("binary IMA log"), std::string::npos) << r.out;
    EXPECT_EQ(pcr_of(r.out), to_hex(testing::ima_expected_pcr(records, alg_id, 10))) << bank << "\n" << r.out;
  }
}

// A list read while the kernel appended to it, or a stray newline after a
// binary list: the whole entries are replayed, the tail is named on stderr
// (offset and size), exit 0; --strict refuses it.
TEST(ReplayIma, PartialTailIsAWarningUnlessStrict) {
  auto records = mixed_log(60);
  Bytes log = testing::ima_binary_log(records);
  const size_t whole = log.size();
  std::string expected = to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10));
  Bytes with_newline = log;
  with_newline.push_back('\n');
  Bytes cut = log;
  Bytes next = testing::ima_binary_entry(testing::sample_ima_record("ima-ng", 999));
  cut.insert(cut.end(), next.begin(), next.begin() + 17);
  std::string text = testing::ima_ascii_log(records);
  std::string line = testing::ima_ascii_line(testing::sample_ima_record("ima-sig", 998));
  struct Case {
    std::string name;
    std::string content;
    size_t offset, bytes;
  };
  for (const Case& c : std::vector<Case>{
           {"newline.bin", std::string(with_newline.begin(), with_newline.end()), whole, 1},
           {"cut.bin", std::string(cut.begin(), cut.end()), whole, 17},
           {"cut.txt", text + line.substr(0, 50), text.size(), 50},
       }) {
    SCOPED_TRACE(c.name);
    std::string path = temp_path(c.name);
    write(path, c.content);
    auto r = run_tpmsec({"replay", "--ima", path, "--strategy", "plain"});
    ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
    EXPECT_EQ(pcr_of(r.out), expected) << r.out;
    EXPECT_NE(r.err.find(fmt::format("warning: {}: it ends in a partial entry, {} byte{} from offset {}", path, c.bytes,
                                     c.bytes == 1 ? "" : "s", c.offset)),
              std::string::npos)
        << r.err;
    auto strict = run_tpmsec({"replay", "--ima", path, "--strategy", "plain", "--strict"});
    EXPECT_EQ(strict.exit_code, testing::kExitUsage) << testing::describe(strict);  // bad input, as a bad line
    EXPECT_NE(strict.err.find("(--strict)"), std::string::npos) << strict.err;
  }
}

// The per-bank lists of Linux 6.10+ (ascii_runtime_measurements_sha256, …):
// the template-hash column is the bank's; the file name says which bank, and
// without it the column's size does.
TEST(ReplayIma, PerBankListsReplay) {
  auto records = mixed_log(50);
  for (auto [suffix, hash_bank] :
       {std::pair{"sha256", alg::kSha256}, std::pair{"sha384", alg::kSha384}, std::pair{"sha512", alg::kSha512},
        std::pair{"sm3", alg::kSm3_256}, std::pair{"sha1", alg::kSha1}}) {
    SCOPED_TRACE(suffix);
    for (auto& r : records) r.hash_bank = hash_bank;
    // The kernel's file names exactly (the bank is taken from them).
    std::string dir = temp_path("per-bank");
    std::filesystem::create_directories(dir);
    std::string ascii = dir + "/ascii_runtime_measurements_" + suffix;
    std::string binary = dir + "/binary_runtime_measurements_" + suffix;
    write(ascii, testing::ima_ascii_log(records));
    write(binary, testing::ima_binary_log(records));
    for (const std::string& path : {ascii, binary}) {
      auto r = run_tpmsec({"replay", "--ima", path, "--strategy", "plain"});
      ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
      EXPECT_EQ(pcr_of(r.out), to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10))) << r.out;
    }
  }
}

TEST(ReplayIma, StopsAtTheFirstBadLineUnlessToldToSkip) {
  auto records = mixed_log(120);
  std::string text;
  for (size_t i = 0; i < records.size(); ++i) {
    if (i == 70) text += "10 0123 ima-ng sha256:00 /broken\n";  // line 71
    text += testing::ima_ascii_line(records[i]) + "\n";
  }
  std::string path = temp_path("bad.txt");
  write(path, text);

  // A bad line is bad input (exit 2, as in verify and predict), refused
  // before any extend: no result comes from part of a list.
  auto r = run_tpmsec({"replay", "--ima", path, "--strategy", "resident"});
  EXPECT_EQ(r.exit_code, testing::kExitUsage) << r.err;
  EXPECT_NE(r.err.find(path + ": line 71:"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "nothing replayed";

  r = run_tpmsec({"replay", "--ima", path, "--strategy", "resident", "--skip-bad"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("line 71:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(skipped)"), std::string::npos);
  EXPECT_EQ(pcr_of(r.out), to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10)));

  // A forged template hash is an integrity problem of that line.
  std::string forged = testing::ima_ascii_line(records[0]);
  forged[3] = forged[3] == 'a' ? 'b' : 'a';
  write(path, forged + "\n" + testing::ima_ascii_line(records[1]) + "\n");
  r = run_tpmsec({"replay", "--ima", path, "--strategy", "plain"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("line 1:"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("result"), std::string::npos) << "no result on an integrity failure:\n" << r.out;
  EXPECT_EQ(r.out.find("equal to the value computed"), std::string::npos) << r.out;
}

// Lines whose event name holds spaces, as the kernel prints an unlinked file,
// in the ima and ima-ng templates (and ima-sig, whose sig follows the name):
// replayed, and the PCR is the one computed from the records.
TEST(ReplayIma, NamesWithSpacesReplay) {
  std::vector<testing::ImaRecord> records;
  for (const char* t : {"ima", "ima-ng", "ima-sig"}) {
    testing::ImaRecord r = testing::sample_ima_record(t, 3);
    r.event_name = "/tmp/#17634599 (deleted)";
    records.push_back(r);
  }
  std::string path = temp_path("deleted.txt");
  write(path, testing::ima_ascii_log(records));
  auto r = run_tpmsec({"replay", "--ima", path, "--strategy", "plain"});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  EXPECT_EQ(pcr_of(r.out), to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10))) << r.out;
  EXPECT_NE(r.out.find("equal to the value computed from the log"), std::string::npos) << r.out;
}

TEST(ReplayIma, Pcr10OnlyWithForce) {
  auto records = mixed_log(20);
  std::string path = temp_path("pcr10.txt");
  write(path, testing::ima_ascii_log(records));
  auto r = run_tpmsec({"replay", "--ima", path, "--pcr", "10"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--force-pcr"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  r = run_tpmsec({"replay", "--ima", path, "--pcr", "10", "--force-pcr", "--strategy", "resident"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A fresh embedded TPM's PCR 10 starts at zero, so the value is the log's.
  EXPECT_NE(r.out.find("PCR 10 = " + to_hex(testing::ima_expected_pcr(records, alg::kSha256, 10))), std::string::npos)
      << r.out;
}

TEST(ReplayIma, PolicyChoosesWithoutStrategy) {
  auto records = mixed_log(30);
  std::string path = temp_path("policy.txt");
  write(path, testing::ima_ascii_log(records));
  auto r = run_tpmsec({"replay", "--ima", path, "--emulate", "slb9670", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rule 'slb9670'"), std::string::npos) << r.err;
  // The shipped policy never goes below prevention (docs/policy.md).
  EXPECT_NE(r.out.find("strategy     resident (prevention), chosen by the policy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(virtual clock)"), std::string::npos);
  EXPECT_EQ(r.err.find("tpmsec: strategy "), std::string::npos) << r.err;

  // An operator's policy choosing checkpoint for the (emulated, so authentic) IFX identity: named on stderr.
  std::string mine = temp_path("policy-ifx.toml");
  write(mine, std::string("schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"ifx\"\nmanufacturer = \"IFX\"\n"
                          "extend = \"checkpoint\"\nreason = \"over budget\"\n[[rule]]\nname = \"default\"\n"
                          "extend = \"resident\"\nreason = \"protect\"\n"));
  r = run_tpmsec({"replay", "--ima", path, "--emulate", "slb9670", "--policy", mine});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("strategy     checkpoint (detection)"), std::string::npos) << r.out;
  EXPECT_NE(
      r.err.find(fmt::format("tpmsec: strategy checkpoint (policy {} rule 'ifx'): detects, does not prevent", mine)),
      std::string::npos)
      << r.err;
}

TEST(ReplayIma, BadArguments) {
  EXPECT_EQ(run_tpmsec({"replay"}).exit_code, 2);
  EXPECT_EQ(run_tpmsec({"replay", "--ima", temp_path("missing")}).exit_code, 2);
  std::string path = temp_path("junk.txt");
  write(path, std::string("this is not a measurement log\n"));
  auto r = run_tpmsec({"replay", "--ima", path});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_EQ(run_tpmsec({"replay", "--ima", path, "--strategy", "fast"}).exit_code, 2);
}

TEST(ReplayEventLog, EveryPcrMatchesTheLog) {
  testing::EventLogBuilder b({alg::kSha1, alg::kSha256});
  b.startup_locality(3);
  for (uint32_t i = 0; i < 40; ++i) {
    std::string data = fmt::format("event {}", i);
    b.measure(i % 8, 0x80000001 + (i % 3), as_bytes(data));
  }
  b.raw_event(0, event_log::kEvNoAction, {{alg::kSha1, Bytes(20, 0)}, {alg::kSha256, Bytes(32, 0)}},
              as_bytes(std::string("not extended")));
  std::string path = temp_path("eventlog.bin");
  write(path, b.bytes());
  auto expected = b.expected_pcrs(alg::kSha256);
  auto r = run_tpmsec({"replay", "--eventlog", path, "--strategy", "resident"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (uint32_t pcr = 1; pcr < 8; ++pcr) {
    EXPECT_NE(r.out.find("match   " + to_hex(expected.at(pcr))), std::string::npos) << "PCR " << pcr << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("starts from locality 3; the log's value is " + to_hex(expected.at(0))), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("DIFFERS"), std::string::npos);
}

// ------------------------------------------------------------------ predict

double total_s(const nlohmann::json& j, const std::string& profile, const std::string& strategy) {
  for (const auto& p : j["profiles"]) {
    if (p["id"] == profile) return p["results"][strategy]["total_s"].get<double>();
  }
  ADD_FAILURE() << "no " << profile;
  return 0;
}

TEST(Predict, PricingEqualsEmulatingEachProfile) {
  auto records = mixed_log(300);
  std::string path = temp_path("predict.txt");
  write(path, testing::ima_ascii_log(records));
  std::string json = temp_path("predict.json"), svg = temp_path("predict.svg");
  auto r = run_tpmsec({"predict", "--ima", path, "--profiles", "slb9670,st33ktpm2x", "--json", json, "--svg", svg});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json p = read_json(json);
  EXPECT_EQ(p["schema"], "tpmsec-predict/1");
  EXPECT_EQ(p["extends"], 300);
  EXPECT_TRUE(p["verified"].get<bool>());
  for (const char* profile : {"slb9670", "st33ktpm2x"}) {
    for (const char* strategy : {"resident", "per-command"}) {
      std::string out = temp_path("emulated.json");
      auto e = run_tpmsec({"replay", "--ima", path, "--emulate", profile, "--strategy", strategy, "--json", out});
      ASSERT_EQ(e.exit_code, 0) << e.err;
      nlohmann::json run = read_json(out)["runs"][0];
      double emulated_tpm_ms = run["tpm_ms"].get<double>();
      double predicted_ms = total_s(p, profile, strategy) * 1000;
      // Only the TPM's share is compared: total_ms also counts the host's real
      // work, which depends on the machine and its sanitizers. Both sides price
      // the same commands with the same model; each emulated command is rounded
      // to a whole nanosecond.
      EXPECT_NEAR(predicted_ms, emulated_tpm_ms, 1e-6 * run["tpm_commands"].get<double>() + 1e-6)
          << profile << " " << strategy;
      EXPECT_GE(run["total_ms"].get<double>(), emulated_tpm_ms);
    }
  }
  std::ifstream f(svg);
  std::stringstream s;
  s << f.rdbuf();
  EXPECT_EQ(s.str().rfind("<svg", 0), 0u);
  EXPECT_NE(s.str().find("</svg>"), std::string::npos);
  EXPECT_NE(r.out.find("slb9670"), std::string::npos);
}

// The seed thread's workload: 12,313 IMA extends on the SLB9670 took 151 ms
// each the Linux 6.10 way and 24.4 ms with the session kept (docs/strategies.md).
TEST(Predict, SeedWorkloadOnSlb9670) {
  std::vector<testing::ImaRecord> records;
  for (int i = 0; i < 12313; ++i) records.push_back(testing::sample_ima_record("ima-ng", i));
  std::string path = temp_path("seed.txt");
  write(path, testing::ima_ascii_log(records));
  std::string json = temp_path("seed.json");
  auto r = run_tpmsec(
      {"predict", "--ima", path, "--profiles", "slb9670", "--strategies", "per-command,resident", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json p = read_json(json);
  double per_command = total_s(p, "slb9670", "per-command");
  double resident = total_s(p, "slb9670", "resident");
  std::cout << fmt::format(
      "12,313 extends on slb9670: per-command {:.1f} s (12,313 x 151 ms = {:.1f} s), resident "
      "{:.1f} s (12,313 x 24.4 ms = {:.1f} s)\n",
      per_command, 12313 * 0.151, resident, 12313 * 0.0244);
  EXPECT_NEAR(per_command, 12313 * 0.151, 0.03 * 12313 * 0.151);
  EXPECT_NEAR(resident, 12313 * 0.0244, 0.03 * 12313 * 0.0244);
}

}  // namespace
}  // namespace tpmsec
