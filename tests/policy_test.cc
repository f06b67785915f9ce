// Per-TPM policy: parsing, validation with line numbers, decisions for the
// shipped profiles, calibration under different budgets, and the CLI.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/run_command.h"
#include "tpmsec/calibration.h"
#include "tpmsec/policy.h"

namespace tpmsec {
namespace {

using testing::run_tpmsec;

const char kDenyList[] = R"(schema = "tpmsec-policy/1"
# deny-list style: protect everything, except the TPMs named here
[[rule]]
name = "slow-infineon"
manufacturer = "IFX"
vendor = "SLB967[03]*"
extend = "plain"
reason = "HMAC'd extend too slow"
source = "lkml 2024-09-11"

[[rule]]
name = "slow-when-measured"
when = ["extend_hmac_ms > 20"]
extend = "checkpoint"
reason = "over budget"

[[rule]]
name = "default"
extend = "resident"
reason = "protect"
)";

const char kAllowList[] = R"(schema = "tpmsec-policy/1"
# allow-list style: protect only the TPMs named here
[[rule]]
name = "fast-st"
manufacturer = "STM"
firmware_min = "74.0"
firmware_max = "74.99"
extend = "resident"
other = "resident"
reason = "fast enough"

[[rule]]
name = "default"
extend = "plain"
other = "per-command"
reason = "unlisted TPMs are not protected"
)";

TpmFacts facts(std::string manufacturer, std::string vendor, std::string firmware) {
  TpmFacts f;
  f.manufacturer = std::move(manufacturer);
  f.vendor = std::move(vendor);
  f.firmware = std::move(firmware);
  return f;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Policy, DenyListDecidesFirstMatch) {
  auto p = parse_policy(kDenyList, "deny.toml");
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_EQ(p->rules.size(), 3u);
  EXPECT_EQ(p->rules[0].line, 3u);

  PolicyDecision d = decide(*p, facts("IFX", "SLB9670", "7.85"));
  ASSERT_NE(d.rule, nullptr);
  EXPECT_EQ(d.rule->name, "slow-infineon");
  EXPECT_EQ(d.extend, StrategyKind::kPlain);
  EXPECT_EQ(d.other, StrategyKind::kPerCommand);  // the default for 'other'

  d = decide(*p, facts("IFX", "SLB9672", "16.10"));
  EXPECT_EQ(d.rule->name, "default");
  EXPECT_EQ(d.extend, StrategyKind::kResident);
  ASSERT_EQ(d.verdicts.size(), 3u);
  EXPECT_NE(d.verdicts[0].why.find("does not match 'SLB967[03]*'"), std::string::npos) << d.verdicts[0].why;
  EXPECT_NE(d.verdicts[1].why.find("needs the measured extend_hmac_ms"), std::string::npos) << d.verdicts[1].why;

  TpmFacts measured = facts("IBM", "SW   TPM", "8217.4131");
  measured.measured["extend_hmac_ms"] = 32.3;
  EXPECT_EQ(decide(*p, measured).rule->name, "slow-when-measured");
  measured.measured["extend_hmac_ms"] = 20.0;  // "> 20" is strict
  EXPECT_EQ(decide(*p, measured).rule->name, "default");
}

TEST(Policy, AllowListMatchesFirmwareRange) {
  auto p = parse_policy(kAllowList, "allow.toml");
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(decide(*p, facts("STM", "", "74.8")).extend, StrategyKind::kResident);
  EXPECT_EQ(decide(*p, facts("stm", "", "74.99")).extend, StrategyKind::kResident);  // manufacturer ignores case
  EXPECT_EQ(decide(*p, facts("STM", "", "74.100")).extend, StrategyKind::kPlain);   // 74.100 > 74.99
  EXPECT_EQ(decide(*p, facts("STM", "", "73.200")).extend, StrategyKind::kPlain);
  auto unknown = decide(*p, facts("STM", "", ""));
  EXPECT_EQ(unknown.extend, StrategyKind::kPlain);
  EXPECT_NE(unknown.verdicts[0].why.find("firmware"), std::string::npos);
}

struct BadPolicy {
  const char* name;
  std::string text;
  size_t line;
  const char* needle;
};

const std::string kHead = "schema = \"tpmsec-policy/1\"\n";  // line 1
const std::string kDefault = "[[rule]]\nname = \"default\"\nextend = \"resident\"\nreason = \"r\"\n";

class PolicyErrors : public ::testing::TestWithParam<BadPolicy> {};

TEST_P(PolicyErrors, NameFileLineAndProblem) {
  const BadPolicy& c = GetParam();
  auto p = parse_policy(c.text, "my.toml");
  ASSERT_FALSE(p.ok()) << c.name;
  const std::string& m = p.error().message();
  EXPECT_EQ(p.error().kind(), ErrorKind::kUsage);
  EXPECT_EQ(m.rfind(fmt::format("my.toml:{}: ", c.line), 0), 0u) << m;
  EXPECT_NE(m.find(c.needle), std::string::npos) << m;
}

INSTANTIATE_TEST_SUITE_P(
    All, PolicyErrors,
    ::testing::Values(
        BadPolicy{"syntax", kHead + "[[rule]]\nname = \"x\nextend = \"plain\"\n", 3, ""},
        BadPolicy{"unknown_strategy", kHead + "[[rule]]\nname = \"a\"\nextend = \"residnet\"\nreason = \"r\"\n", 4,
                  "unknown strategy 'residnet'"},
        BadPolicy{"unknown_key", kHead + "[[rule]]\nname = \"a\"\nvendr = \"SLB*\"\nextend = \"plain\"\n", 4,
                  "unknown key 'vendr'"},
        BadPolicy{"wrong_type", kHead + "[[rule]]\nname = \"a\"\nmanufacturer = 7\nextend = \"plain\"\n", 4,
                  "'manufacturer' must be a string"},
        BadPolicy{"unknown_property", kHead + "[[rule]]\nwhen = [\"hmac_ms > 3\"]\nextend = \"plain\"\nreason = \"r\"\n",
                  3, "unknown property 'hmac_ms'"},
        BadPolicy{"bad_condition", kHead + "[[rule]]\nwhen = [\"extend_hmac_ms = 3\"]\nextend = \"plain\"\n", 3,
                  "PROPERTY OP NUMBER"},
        BadPolicy{"other_checkpoint", kHead + "[[rule]]\nextend = \"plain\"\nother = \"checkpoint\"\n", 4,
                  "'other' cannot be checkpoint"},
        BadPolicy{"no_extend", kHead + "[[rule]]\nname = \"a\"\nreason = \"r\"\n", 2, "has no 'extend'"},
        BadPolicy{"no_reason", kHead + "[[rule]]\nname = \"a\"\nextend = \"plain\"\n", 2, "has no 'reason'"},
        BadPolicy{"after_default", kHead + kDefault + "[[rule]]\nname = \"late\"\nmanufacturer = \"IFX\"\n"
                                                       "extend = \"plain\"\nreason = \"r\"\n",
                  6, "rule 'late' (line 6) can never match: rule 'default' (line 2)"},
        BadPolicy{"shadowed", kHead + "[[rule]]\nname = \"ifx\"\nmanufacturer = \"IFX\"\nextend = \"plain\"\n"
                                      "reason = \"r\"\n[[rule]]\nname = \"slb\"\nmanufacturer = \"IFX\"\n"
                                      "vendor = \"SLB9670\"\nextend = \"resident\"\nreason = \"r\"\n" + kDefault,
                  7, "rule 'slb' (line 7) can never match: rule 'ifx' (line 2) above"},
        BadPolicy{"empty_firmware_range", kHead + "[[rule]]\nname = \"a\"\nfirmware_min = \"7.90\"\n"
                                                  "firmware_max = \"7.85\"\nextend = \"plain\"\nreason = \"r\"\n" +
                                                  kDefault,
                  2, "firmware_min 7.90 is above firmware_max 7.85"},
        BadPolicy{"bad_firmware", kHead + "[[rule]]\nfirmware_min = \"seven\"\nextend = \"plain\"\n", 3,
                  "must be a version"},
        BadPolicy{"contradiction", kHead + "[[rule]]\nname = \"a\"\nwhen = [\"extend_hmac_ms > 20\", "
                                           "\"extend_hmac_ms < 10\"]\nextend = \"plain\"\nreason = \"r\"\n" + kDefault,
                  2, "conditions on extend_hmac_ms contradict"},
        BadPolicy{"no_default", kHead + "[[rule]]\nname = \"a\"\nmanufacturer = \"IFX\"\nextend = \"plain\"\n"
                                        "reason = \"r\"\n",
                  2, "must match every TPM"},
        BadPolicy{"no_schema", kDefault, 1, "missing schema"},
        BadPolicy{"wrong_schema", "schema = \"tpmsec-policy/9\"\n" + kDefault, 1, "not supported"},
        BadPolicy{"unknown_top_level", kHead + "rules = 3\n" + kDefault, 2, "unknown key 'rules'"},
        BadPolicy{"no_rules", kHead, 1, "no rules"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Policy, GlobMatching) {
  EXPECT_TRUE(glob_match("SLB9670*", "SLB9670"));
  EXPECT_TRUE(glob_match("SLB967?", "SLB9672"));
  EXPECT_TRUE(glob_match("SLB967[03]", "SLB9673"));
  EXPECT_FALSE(glob_match("SLB967[03]", "SLB9672"));
  EXPECT_TRUE(glob_match("SLB967[!03]", "SLB9672"));
  EXPECT_TRUE(glob_match("*PCT7*", "NPCT75x"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_FALSE(glob_match("SLB9670", "SLB96701"));
  EXPECT_FALSE(glob_match("[abc", "a"));  // an unterminated class matches nothing
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  EXPECT_EQ(split_list("slb9670,,st33ktpm2x,"), (std::vector<std::string>{"slb9670", "st33ktpm2x"}));
  EXPECT_TRUE(split_list("").empty());
}

TEST(Policy, ConditionsAreTestedOnlyWhenMeasured) {
  Condition c{"extend_hmac_ms", Condition::Op::kGreaterEqual, 20};
  EXPECT_TRUE(c.holds(20));
  EXPECT_FALSE(c.holds(19.99));
  EXPECT_EQ(c.text(), "extend_hmac_ms >= 20");
}

// The shipped policy decides, for every shipped profile, what calibration
// from the profile's figures decides, and it is what `policy derive` makes.
TEST(DefaultPolicy, DecidesWhatTheProfileFiguresDecide) {
  auto p = load_policy(std::string(TPMSEC_DATA_DIR) + "/policy/default.toml");
  ASSERT_TRUE(p.ok()) << p.error().message();
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  ASSERT_GE(profiles->size(), 10u);
  for (const LatencyProfile& profile : *profiles) {
    TpmFacts f = facts_from_info(emulated_info(profile, TpmInfo{}).info);
    PolicyDecision d = decide(*p, f);
    ASSERT_NE(d.rule, nullptr) << profile.id;
    Calibration c = choose_strategy(costs_from_profile(profile), kDefaultBudgetMs);
    EXPECT_EQ(d.extend, c.extend) << profile.id << " matched rule " << d.rule->name;
    // Every rule cites its figures.
    EXPECT_NE(d.rule->source.find("profile "), std::string::npos) << profile.id;
  }
  // The figures of the seed thread's TPM: resident 24.36 ms does not fit 20 ms.
  for (const LatencyProfile& profile : *profiles) {
    if (profile.id != "slb9670") continue;
    auto d = decide(*p, facts_from_info(emulated_info(profile, TpmInfo{}).info));
    EXPECT_EQ(d.rule->name, "slb9670");
    EXPECT_EQ(d.extend, StrategyKind::kCheckpoint);
    EXPECT_NE(d.rule->source.find("resident 24.36"), std::string::npos) << d.rule->source;
  }
}

TEST(DefaultPolicy, IsWhatPolicyDeriveMakes) {
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  auto derived = derive_policy(*profiles, kDefaultBudgetMs, "tpmsec policy derive --budget-ms 20 --profiles all");
  ASSERT_TRUE(derived.ok()) << derived.error().message();
  EXPECT_EQ(*derived, read_text(std::string(TPMSEC_DATA_DIR) + "/policy/default.toml"))
      << "data/policy/default.toml is stale: regenerate it with "
         "`build/tpmsec policy derive -o data/policy/default.toml`";
}

TEST(Calibration, MostProtectiveThatFitsTheBudget) {
  StrategyCosts costs;
  costs.per_extend_ms = {{StrategyKind::kPerCommand, 149.3}, {StrategyKind::kSavedContext, 74.1},
                         {StrategyKind::kResident, 24.4},    {StrategyKind::kPlain, 6.4},
                         {StrategyKind::kCheckpoint, 6.6}};
  EXPECT_EQ(choose_strategy(costs, 1000).extend, StrategyKind::kResident);  // cheapest prevention
  EXPECT_EQ(choose_strategy(costs, 30).extend, StrategyKind::kResident);
  EXPECT_EQ(choose_strategy(costs, 20).extend, StrategyKind::kCheckpoint);
  EXPECT_EQ(choose_strategy(costs, 6.5).extend, StrategyKind::kPlain);
  Calibration none = choose_strategy(costs, 1);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.extend, StrategyKind::kPlain);
  EXPECT_NE(none.reason.find("no strategy fits"), std::string::npos);
  EXPECT_EQ(choose_strategy(costs, 20).other, StrategyKind::kResident);
  costs.per_extend_ms.erase(StrategyKind::kResident);  // e.g. no free session slot
  EXPECT_EQ(choose_strategy(costs, 80).extend, StrategyKind::kSavedContext);
}

TEST(Calibration, BenchJsonOfTheWrongShapeIsAnErrorNotAnException) {
  using nlohmann::json;
  for (const json& bad : {json(3), json{{"schema", 1}}, json{{"schema", "tpmsec-bench/1"}, {"strategies", "x"}},
                          json{{"schema", "tpmsec-bench/1"}, {"strategies", {{{"name", 7}}}}},
                          json{{"schema", "tpmsec-bench/1"}, {"strategies", {{{"name", "resident"},
                                                                              {"per_extend_ms", {{"median", "fast"}}}}}}}}) {
    auto c = costs_from_bench_json(bad, "r.json");
    EXPECT_FALSE(c.ok()) << bad.dump();
  }
  json good = {{"schema", "tpmsec-bench/1"},
               {"strategies", {{{"name", "checkpoint"}, {"per_extend_ms", {{"n", 9}, {"median", 6.4}, {"mean", 6.6}}}},
                               {{"name", "resident"}, {"per_extend_ms", {{"n", 9}, {"median", 24.4}, {"mean", 25}}}}}},
               {"primitives", {{{"name", "StartAuthSession (ECC salt)"}, {"tpm_ms", {{"n", 3}, {"median", 84.7}}}}}}};
  auto c = costs_from_bench_json(good, "r.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->per_extend_ms.at(StrategyKind::kCheckpoint), 6.6);  // amortized: the mean
  EXPECT_EQ(c->per_extend_ms.at(StrategyKind::kResident), 24.4);
  EXPECT_EQ(c->start_session_ms, 84.7);
}

// ------------------------------------------------------------------ CLI

std::string decision_line(const std::string& out) {
  size_t at = out.find("decision");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

TEST(PolicyCli, CalibrateFollowsTheBudget) {
  struct Case {
    const char* budget;
    const char* extend;
  } cases[] = {{"1000", "resident"}, {"30", "resident"}, {"20", "checkpoint"}, {"5", "plain"}};
  for (const Case& c : cases) {
    auto r = run_tpmsec({"policy", "calibrate", "--emulate", "slb9670", "--budget-ms", c.budget});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(decision_line(r.out).find(fmt::format("PCR extends: {} ", c.extend)), std::string::npos)
        << "budget " << c.budget << ": " << r.out;
    EXPECT_NE(r.out.find("linux "), std::string::npos);
  }
}

TEST(PolicyCli, CalibratedRulePastesIntoAPolicy) {
  auto r = run_tpmsec({"policy", "calibrate", "--emulate", "npct650"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  size_t at = r.out.find("[[rule]]");
  ASSERT_NE(at, std::string::npos) << r.out;
  std::string text = kHead + r.out.substr(at) + kDefault;
  auto p = parse_policy(text, "pasted.toml");
  ASSERT_TRUE(p.ok()) << p.error().message() << "\n" << text;
  EXPECT_EQ(decide(*p, facts("NTC", "rlsNPCT", "1.3")).rule, &p->rules[0]);
  EXPECT_EQ(p->rules[0].extend, StrategyKind::kCheckpoint);  // resident 59.7 ms > 20
}

TEST(PolicyCli, ShowExplainsTheDecisionForEachProfile) {
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  for (const LatencyProfile& profile : *profiles) {
    auto r = run_tpmsec({"policy", "show", "--emulate", profile.id});
    ASSERT_EQ(r.exit_code, 0) << profile.id << ": " << r.err;
    EXPECT_NE(r.out.find("MATCHES"), std::string::npos) << r.out;
    Calibration c = choose_strategy(costs_from_profile(profile), kDefaultBudgetMs);
    EXPECT_NE(decision_line(r.out).find(fmt::format("PCR extends: {} ", strategy_name(c.extend))), std::string::npos)
        << profile.id << ": " << r.out;
  }
}

TEST(PolicyCli, ShowUsesMeasurementsFromABenchResult) {
  std::string json = ::testing::TempDir() + "/policy-bench.json";
  auto b = run_tpmsec({"bench", "--emulate", "slb9673", "--iterations", "3", "--no-primitives", "--json", json});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  // The embedded TPM (IBM) matches no named rule; its measured figures (those of
  // the slb9673 model) are over budget, so the measured rule decides.
  auto r = run_tpmsec({"policy", "show", "--measurements", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("measured-hmac-over-budget    line"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MATCHES"), std::string::npos);
  EXPECT_NE(decision_line(r.out).find("checkpoint"), std::string::npos) << r.out;
}

TEST(PolicyCli, MalformedPolicyIsAUsageError) {
  std::string path = ::testing::TempDir() + "/bad-policy.toml";
  std::ofstream(path) << kHead << "[[rule]]\nname = \"a\"\nextend = \"residnet\"\nreason = \"r\"\n";
  for (auto args : {std::vector<std::string>{"policy", "check", path},
                    std::vector<std::string>{"policy", "show", "--policy", path},
                    std::vector<std::string>{"pcr", "extend", "16", std::string(64, 'a'), "--policy", path}}) {
    auto r = run_tpmsec(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(path + ":4: unknown strategy 'residnet'"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
  EXPECT_EQ(run_tpmsec({"policy", "check", path + ".missing"}).exit_code, 2);
}

TEST(PolicyCli, PcrExtendFollowsThePolicyUnlessToldAStrategy) {
  const std::string digest(64, 'b');
  auto r = run_tpmsec({"pcr", "extend", "16", digest, "--emulate", "slb9670", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rule 'slb9670'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("checkpoint for extends"), std::string::npos) << r.err;

  r = run_tpmsec({"pcr", "extend", "16", digest, "--emulate", "st33ktpm2x", "--verbose"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resident for extends"), std::string::npos) << r.err;

  r = run_tpmsec({"pcr", "extend", "16", digest, "--emulate", "slb9670", "--strategy", "per-command", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("policy"), std::string::npos) << r.err;

  r = run_tpmsec({"pcr", "extend", "16", digest, "--strategy", "bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown strategy 'bogus'"), std::string::npos) << r.err;
  r = run_tpmsec({"pcr", "extend", "16", digest, "--strategy", "plain", "--protect", "hmac"});
  EXPECT_EQ(r.exit_code, 2);
}

TEST(PolicyCli, EveryTpmCommandTakesEmulate) {
  for (auto args : {std::vector<std::string>{"info"}, std::vector<std::string>{"pcr", "read", "16"},
                    std::vector<std::string>{"random", "8"}, std::vector<std::string>{"null-key"},
                    std::vector<std::string>{"pcr", "reset", "16"}}) {
    args.push_back("--emulate");
    args.push_back("slb9672");
    auto r = run_tpmsec(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("emulated slb9672:"), std::string::npos) << args[0] << ": " << r.err;
  }
  auto info = run_tpmsec({"info", "--emulate", "slb9672"});
  EXPECT_NE(info.out.find("\"IFX\""), std::string::npos) << info.out;
  auto bad = run_tpmsec({"info", "--emulate", "no-such-profile"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

}  // namespace
}  // namespace tpmsec
