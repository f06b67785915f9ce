// Per-TPM policy: parsing, validation with line numbers, decisions for the
// shipped profiles, the floor (no fact an interposer chose lowers
// protection), the audited identity read against an interposer that rewrites
// GetCapability, calibration under different budgets, and the CLI.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <filesystem>

#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "support/fault_injection.h"
#include "support/run_command.h"
#include "support/test_tpm.h"
#include "tpmsec/calibration/calibration.h"
#include "tpmsec/commands.h"
#include "tpmsec/emulation/emulated_identity.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/profile_summary.h"
#include "tpmsec/host/policy_path.h"
#include "tpmsec/null_key.h"
#include "tpmsec/pcr.h"
#include "tpmsec/policy/policy.h"
#include "tpmsec/protect.h"

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

// Facts as decide_on_tpm leaves them after an audited read confirmed them.
TpmFacts facts(std::string manufacturer, std::string vendor, std::string firmware,
               FactOrigin origin = FactOrigin::kAudited) {
  TpmFacts f;
  f.manufacturer = std::move(manufacturer);
  f.vendor = std::move(vendor);
  f.firmware = std::move(firmware);
  f.identity_origin = origin;
  return f;
}

// A policy file the operator chose (--policy FILE): it may lower protection.
Policy operator_policy(std::string_view text, const std::string& origin = "mine.toml") {
  auto p = parse_policy(text, origin);
  EXPECT_TRUE(p.ok()) << p.error().message();
  Policy policy = p.ok() ? *p : Policy{};
  policy.operator_chosen = true;
  return policy;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Policy, DenyListDecidesFirstMatch) {
  auto p = std::make_optional(operator_policy(kDenyList, "deny.toml"));
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
  measured.measured_origin = FactOrigin::kProfile;
  EXPECT_EQ(decide(*p, measured).rule->name, "slow-when-measured");
  measured.measured["extend_hmac_ms"] = 20.0;  // "> 20" is strict
  EXPECT_EQ(decide(*p, measured).rule->name, "default");
}

TEST(Policy, AllowListMatchesFirmwareRange) {
  auto p = std::make_optional(operator_policy(kAllowList, "allow.toml"));
  EXPECT_EQ(decide(*p, facts("STM", "", "74.8")).extend, StrategyKind::kResident);
  EXPECT_EQ(decide(*p, facts("stm", "", "74.99")).extend, StrategyKind::kResident);  // manufacturer ignores case
  EXPECT_EQ(decide(*p, facts("STM", "", "74.100")).extend, StrategyKind::kPlain);    // 74.100 > 74.99
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
        BadPolicy{"unknown_property",
                  kHead + "[[rule]]\nwhen = [\"hmac_ms > 3\"]\nextend = \"plain\"\nreason = \"r\"\n", 3,
                  "unknown property 'hmac_ms'"},
        BadPolicy{"bad_condition", kHead + "[[rule]]\nwhen = [\"extend_hmac_ms = 3\"]\nextend = \"plain\"\n", 3,
                  "PROPERTY OP NUMBER"},
        BadPolicy{"other_checkpoint", kHead + "[[rule]]\nextend = \"plain\"\nother = \"checkpoint\"\n", 4,
                  "'other' cannot be checkpoint"},
        BadPolicy{"no_extend", kHead + "[[rule]]\nname = \"a\"\nreason = \"r\"\n", 2, "has no 'extend'"},
        BadPolicy{"no_reason", kHead + "[[rule]]\nname = \"a\"\nextend = \"plain\"\n", 2, "has no 'reason'"},
        BadPolicy{"after_default",
                  kHead + kDefault +
                      "[[rule]]\nname = \"late\"\nmanufacturer = \"IFX\"\n"
                      "extend = \"plain\"\nreason = \"r\"\n",
                  6, "rule 'late' (line 6) can never match: rule 'default' (line 2)"},
        BadPolicy{"shadowed",
                  kHead +
                      "[[rule]]\nname = \"ifx\"\nmanufacturer = \"IFX\"\nextend = \"plain\"\n"
                      "reason = \"r\"\n[[rule]]\nname = \"slb\"\nmanufacturer = \"IFX\"\n"
                      "vendor = \"SLB9670\"\nextend = \"resident\"\nreason = \"r\"\n" +
                      kDefault,
                  7, "rule 'slb' (line 7) can never match: rule 'ifx' (line 2) above"},
        BadPolicy{"empty_firmware_range",
                  kHead +
                      "[[rule]]\nname = \"a\"\nfirmware_min = \"7.90\"\n"
                      "firmware_max = \"7.85\"\nextend = \"plain\"\nreason = \"r\"\n" +
                      kDefault,
                  2, "firmware_min 7.90 is above firmware_max 7.85"},
        BadPolicy{"bad_firmware", kHead + "[[rule]]\nfirmware_min = \"seven\"\nextend = \"plain\"\n", 3,
                  "must be a version"},
        BadPolicy{"contradiction",
                  kHead +
                      "[[rule]]\nname = \"a\"\nwhen = [\"extend_hmac_ms > 20\", "
                      "\"extend_hmac_ms < 10\"]\nextend = \"plain\"\nreason = \"r\"\n" +
                      kDefault,
                  2, "conditions on extend_hmac_ms contradict"},
        BadPolicy{"no_default",
                  kHead + "[[rule]]\nname = \"a\"\nmanufacturer = \"IFX\"\nextend = \"plain\"\n"
                          "reason = \"r\"\n",
                  2, "must match every TPM"},
        BadPolicy{"no_schema", kDefault, 1, "missing schema"},
        BadPolicy{"wrong_schema", "schema = \"tpmsec-policy/9\"\n" + kDefault, 1, "not supported"},
        BadPolicy{"unknown_top_level", kHead + "rules = 3\n" + kDefault, 2, "unknown key 'rules'"},
        BadPolicy{"no_rules", kHead, 1, "no rules"},
        BadPolicy{"fallback_not_prevention",
                  kHead + "[[rule]]\nname = \"a\"\nextend = \"plain\"\n"
                          "fallback = \"checkpoint\"\nreason = \"r\"\n",
                  5, "'fallback' must be a prevention strategy"},
        BadPolicy{"fallback_on_prevention",
                  kHead + "[[rule]]\nname = \"a\"\nextend = \"resident\"\n"
                          "fallback = \"per-command\"\nreason = \"r\"\n",
                  2, "rule 'a' keeps prevention: 'fallback' and 'trust_timings'"},
        BadPolicy{"trust_timings_on_prevention",
                  kHead + "[[rule]]\nname = \"a\"\nextend = \"resident\"\n"
                          "trust_timings = true\nreason = \"r\"\n",
                  2, "keeps prevention"},
        BadPolicy{"trust_timings_not_bool", kHead + "[[rule]]\nextend = \"plain\"\ntrust_timings = \"yes\"\n", 4,
                  "'trust_timings' must be true or false"},
        BadPolicy{"null_key_unknown", kHead + "[[rule]]\nextend = \"resident\"\nnull_key = \"cache\"\n", 4,
                  "'null_key' must be \"reload\" or \"recreate\", got 'cache'"},
        BadPolicy{"checkpoint_every_negative", kHead + "[[rule]]\nextend = \"resident\"\ncheckpoint_every = -1\n", 4,
                  "'checkpoint_every' must be a whole number from 0 (only at the end) to 1000000"},
        BadPolicy{"checkpoint_every_text", kHead + "[[rule]]\nextend = \"resident\"\ncheckpoint_every = \"10\"\n", 4,
                  "'checkpoint_every' must be a whole number"}),
    [](const auto& info) { return std::string(info.param.name); });

// A fleet's policy of many chips is checked by what can cover what, not every
// pair: 50,000 rules, then rules that only a glob, a case-insensitive
// manufacturer or an identity-free rule far above shadow.
TEST(Policy, ManyRulesAreCheckedAndTheFirstShadowingRuleIsNamed) {
  std::string text = kHead;
  size_t line = 2;
  auto rule = [&](const std::string& name, const std::string& keys) {
    text += "[[rule]]\nname = \"" + name + "\"\n" + keys + "extend = \"resident\"\nreason = \"r\"\n";
    size_t at = line;
    line += 4 + static_cast<size_t>(std::count(keys.begin(), keys.end(), '\n'));
    return at;
  };
  for (int i = 0; i < 25000; ++i) {
    rule("m" + std::to_string(i), "manufacturer = \"M" + std::to_string(i) + "\"\n");
    rule("v" + std::to_string(i), "manufacturer = \"IFX\"\nvendor = \"SLB" + std::to_string(i) + "\"\n");
  }
  size_t glob = rule("glob", "manufacturer = \"ifx\"\nvendor = \"TPM9*\"\n");
  std::string good = text + kDefault;
  auto ok = parse_policy(good, "many.toml");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->rules.size(), 50002u);
  struct Case {
    std::string keys;
    std::string shadowed_by;
  };
  for (const Case& c :
       {Case{"manufacturer = \"IFX\"\nvendor = \"TPM9670\"\n", fmt::format("rule 'glob' (line {})", glob)},
        Case{"manufacturer = \"m17\"\nfirmware_min = \"1.0\"\n", "rule 'm17' (line "},
        Case{"manufacturer = \"IFX\"\nvendor = \"SLB42\"\n", "rule 'v42' (line "}}) {
    SCOPED_TRACE(c.keys);
    const std::string base = text;
    const size_t saved = line;
    size_t at = rule("late", c.keys);
    std::string bad = text + kDefault;
    text = base;  // the next case starts without it
    line = saved;
    auto r = parse_policy(bad, "many.toml");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message().find(fmt::format("rule 'late' (line {}) can never match: {}", at, c.shadowed_by)),
              std::string::npos)
        << r.error().message();
  }
}

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

// ------------------------------------------------------------------ the floor

const char kLowering[] = R"(schema = "tpmsec-policy/1"
[[rule]]
name = "slow-microchip"
manufacturer = "MCHP"
extend = "plain"
other = "plain"
reason = "too slow for HMAC"

[[rule]]
name = "default"
extend = "resident"
reason = "protect"
)";

TEST(Floor, TheShippedPolicyNeverLowersProtection) {
  auto parsed = parse_policy(kLowering, "default.toml");  // as if shipped: not the operator's
  ASSERT_TRUE(parsed.ok());
  PolicyDecision d = decide(*parsed, facts("MCHP", "", "", FactOrigin::kAudited));
  EXPECT_EQ(d.rule->name, "slow-microchip");
  EXPECT_EQ(d.extend, StrategyKind::kResident);
  EXPECT_EQ(d.other, StrategyKind::kResident);
  EXPECT_EQ(d.lifted_extend, StrategyKind::kPlain);
  EXPECT_EQ(d.lifted_other, StrategyKind::kPlain);
  EXPECT_NE(d.floor_reason.find("the shipped policy never lowers protection"), std::string::npos) << d.floor_reason;
  EXPECT_FALSE(d.needs_audited_identity);  // no read can change that
}

TEST(Floor, AnOperatorsRuleLowersOnlyOnAnAuthenticIdentity) {
  Policy p = operator_policy(kLowering);
  for (FactOrigin origin : {FactOrigin::kAudited, FactOrigin::kProfile, FactOrigin::kNoBus}) {
    PolicyDecision d = decide(p, facts("MCHP", "", "", origin));
    EXPECT_EQ(d.extend, StrategyKind::kPlain) << fact_origin_text(origin);
    EXPECT_FALSE(d.lifted_extend);
  }
  PolicyDecision d = decide(p, facts("MCHP", "", "", FactOrigin::kUnauthenticated));
  EXPECT_EQ(d.extend, StrategyKind::kResident);
  EXPECT_EQ(d.lifted_extend, StrategyKind::kPlain);
  EXPECT_TRUE(d.needs_audited_identity);
  EXPECT_NE(d.floor_reason.find("identity, read without authentication"), std::string::npos) << d.floor_reason;
  EXPECT_NE(d.fallback_reason.find("the default prevention strategy; no figures"), std::string::npos)
      << d.fallback_reason;
  // What it rests on, as -v and policy show say.
  ASSERT_EQ(d.rests_on.size(), 2u);
  EXPECT_EQ(d.rests_on[0], "policy mine.toml (chosen by the operator)");
  EXPECT_EQ(d.rests_on[1], "identity: manufacturer, vendor, firmware (read without authentication)");
  // Once an audited read was tried and could not be made, the note says why.
  TpmFacts unsalted = facts("MCHP", "", "", FactOrigin::kUnauthenticated);
  unsalted.identity_note = "--unsalted: no";
  d = decide(p, unsalted);
  EXPECT_EQ(d.extend, StrategyKind::kResident);
  EXPECT_NE(d.floor_reason.find("; --unsalted: no"), std::string::npos);
}

// A rule that does not test the identity still rests on it when an earlier
// rule's not matching decided: forging "not IFX" must not reach the plain default.
TEST(Floor, EarlierRulesNotMatchingAreFactsToo) {
  Policy allow = operator_policy(kAllowList);
  PolicyDecision d = decide(allow, facts("NTC", "", "", FactOrigin::kUnauthenticated));
  EXPECT_EQ(d.rule->name, "default");
  EXPECT_EQ(d.extend, StrategyKind::kResident);
  EXPECT_EQ(d.lifted_extend, StrategyKind::kPlain);
  EXPECT_TRUE(d.needs_audited_identity);
  // A policy whose only rule lowers protection for every TPM rests on no fact:
  // the operator said so for this machine.
  Policy everything = operator_policy(
      "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"all\"\nextend = \"checkpoint\"\nreason = \"rig\"\n");
  d = decide(everything, facts("NTC", "", "", FactOrigin::kUnauthenticated));
  EXPECT_EQ(d.extend, StrategyKind::kCheckpoint);
  EXPECT_FALSE(d.needs_audited_identity);
  EXPECT_EQ(d.rests_on.size(), 1u);
}

const char kTimed[] = R"(schema = "tpmsec-policy/1"
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

// An interposer delaying responses makes any TPM look slow: bus timings lower
// protection only when the operator's rule says trust_timings.
TEST(Floor, BusTimingsLowerProtectionOnlyWhenTheRuleTrustsThem) {
  TpmFacts slow = facts("IBM", "SW   TPM", "");
  slow.measured = {{"extend_hmac_ms", 32.0}, {"saved_context_ms", 30.0}, {"per_command_ms", 90.0}};
  slow.measured_source = "bench result r.json";
  Policy p = operator_policy(kTimed);
  PolicyDecision d = decide(p, slow);  // bus timings
  EXPECT_EQ(d.lifted_extend, StrategyKind::kCheckpoint);
  EXPECT_NE(d.floor_reason.find("timings (extend_hmac_ms) measured over a bus"), std::string::npos) << d.floor_reason;
  EXPECT_NE(d.floor_reason.find("trust_timings = true"), std::string::npos);
  // The cheapest prevention strategy by the same figures: among prevention
  // strategies an inflated timing moves nothing that matters.
  EXPECT_EQ(d.extend, StrategyKind::kSavedContext);
  EXPECT_NE(d.fallback_reason.find("bench result r.json: saved-context 30.00 ms"), std::string::npos)
      << d.fallback_reason;
  EXPECT_NE(d.rests_on.back().find("timings: extend_hmac_ms (read without authentication, bench result r.json)"),
            std::string::npos)
      << d.rests_on.back();

  slow.measured_origin = FactOrigin::kProfile;  // --emulate: the profile's figures
  EXPECT_EQ(decide(p, slow).extend, StrategyKind::kCheckpoint);

  slow.measured_origin = FactOrigin::kUnauthenticated;
  std::string trusted(kTimed);
  trusted.replace(trusted.find("reason = \"over budget\""), 0, "trust_timings = true\nfallback = \"per-command\"\n");
  EXPECT_EQ(decide(operator_policy(trusted), slow).extend, StrategyKind::kCheckpoint);
  // Shipped, the same rule still may not.
  auto shipped = parse_policy(trusted, "default.toml");
  ASSERT_TRUE(shipped.ok()) << shipped.error().message();
  d = decide(*shipped, slow);
  EXPECT_EQ(d.extend, StrategyKind::kPerCommand);  // the rule's own fallback
  EXPECT_EQ(d.fallback_reason, "the rule's fallback");
  EXPECT_NE(to_toml(shipped->rules[0]).find("fallback = \"per-command\"\ntrust_timings = true\n"), std::string::npos)
      << to_toml(shipped->rules[0]);
}

TEST(Floor, NoticesNameWhatIsGivenUp) {
  EXPECT_EQ(weak_strategy_notice(StrategyKind::kPlain, "operator's --strategy"),
            "tpmsec: strategy plain (operator's --strategy): extends are not protected against a bus interposer\n");
  EXPECT_EQ(weak_strategy_notice(StrategyKind::kCheckpoint, "x"),
            "tpmsec: strategy checkpoint (x): detects, does not prevent, a dropped or substituted extend; on "
            "resettable PCRs 16/23 a reset followed by a replay is not detected\n");
  for (StrategyKind k : {StrategyKind::kPerCommand, StrategyKind::kSavedContext, StrategyKind::kResident}) {
    EXPECT_TRUE(prevents(k));
    EXPECT_EQ(weak_strategy_notice(k, "x"), "");
  }
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
  // The figures of the seed thread's TPM: resident 24.36 ms does not fit 20 ms,
  // and the floor keeps it anyway: checkpoint (6.42 ms: PCR_Read 4.255 ms by rule A3
  // from the TPMScan runs, + HMAC 18.0, every 350 extends, the interval that
  // keeps the reads within 1% of a plain extend) only detects.
  for (const LatencyProfile& profile : *profiles) {
    if (profile.id != "slb9670") continue;
    auto d = decide(*p, facts_from_info(emulated_info(profile, TpmInfo{}).info));
    EXPECT_EQ(d.rule->name, "slb9670");
    EXPECT_EQ(d.extend, StrategyKind::kResident);
    EXPECT_NE(d.rule->source.find("resident 24.36"), std::string::npos) << d.rule->source;
    EXPECT_NE(d.rule->reason.find("checkpoint would fit at 6.42 ms but only detects (--allow-detection)"),
              std::string::npos)
        << d.rule->reason;
  }
}

// The floor, in the shipped file itself: no rule chooses plain or checkpoint,
// so whatever identity or timing an interposer makes the TPM report, the
// shipped policy decides prevention. Every profile's identity, each with
// every profile's figures, as bus timings or as a profile's.
TEST(DefaultPolicy, NoRuleAndNoFactsChooseBelowPrevention) {
  auto p = load_policy(shipped_policy_path());
  ASSERT_TRUE(p.ok()) << p.error().message();
  for (const PolicyRule& r : p->rules) {
    EXPECT_TRUE(prevents(r.extend) && prevents(r.other)) << r.name << " (line " << r.line << ")";
  }
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  for (const LatencyProfile& identity : *profiles) {
    for (const LatencyProfile& figures : *profiles) {
      for (FactOrigin origin : {FactOrigin::kUnauthenticated, FactOrigin::kProfile}) {
        TpmFacts f = facts_from_info(emulated_info(identity, TpmInfo{}).info);
        f.identity_origin = origin;
        f.measured = measured_properties(costs_from_profile(figures));
        f.measured_origin = origin;
        PolicyDecision d = decide(*p, f);
        ASSERT_NE(d.rule, nullptr);
        EXPECT_TRUE(prevents(d.extend) && prevents(d.other))
            << identity.id << " with the figures of " << figures.id << ": rule " << d.rule->name;
        EXPECT_FALSE(d.lifted_extend) << "nothing to lift in the shipped policy";
      }
    }
  }
}

// How sessions run is the matched rule's (SessionTuning); a rule that says
// nothing keeps the defaults, and to_toml writes what it read.
TEST(SessionTuning, TheMatchedRuleTunesTheSessions) {
  auto p = parse_policy(std::string(kHead) +
                            "[[rule]]\nname = \"amd\"\nmanufacturer = \"AMD\"\nextend = \"resident\"\n"
                            "null_key = \"recreate\"\ncheckpoint_every = 0\nreason = \"r\"\n"
                            "[[rule]]\nname = \"default\"\nextend = \"resident\"\nreason = \"r\"\n",
                        "<t>");
  ASSERT_TRUE(p.ok()) << p.error().message();
  TpmFacts amd;
  amd.manufacturer = "AMD";
  PolicyDecision d = decide(*p, amd);
  EXPECT_EQ(d.tuning.null_key, NullKeyLoad::kRecreate);
  EXPECT_EQ(d.tuning.checkpoint_every, 0u);
  TpmFacts other;
  other.manufacturer = "IFX";
  d = decide(*p, other);
  EXPECT_EQ(d.tuning.null_key, NullKeyLoad::kReload);
  EXPECT_EQ(d.tuning.checkpoint_every, 100u);
  const std::string text = to_toml(p->rules[0]);
  EXPECT_NE(text.find("null_key = \"recreate\"\ncheckpoint_every = 0\n"), std::string::npos) << text;
}

// policy derive: recreate where the chip creates the ECC null key faster than
// it loads its context, and the checkpoint interval whose audited reads stay
// within 1% of plain extends.
TEST(SessionTuning, DerivedFromEachProfilesFigures) {
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  for (const LatencyProfile& profile : *profiles) {
    SCOPED_TRACE(profile.id);
    const ExtendFigures f = extend_figures(profile);
    const SessionTuning t = tuning_from_profile(profile, SaltKind::kEcc);
    EXPECT_EQ(t.null_key == NullKeyLoad::kRecreate, f.create_null_key_ms < f.reload_null_key_ms);
    EXPECT_EQ(tuning_from_profile(profile, SaltKind::kRsa).null_key, NullKeyLoad::kReload);
    ASSERT_GT(t.checkpoint_every, 0u);
    EXPECT_LE(f.audited_read_ms / t.checkpoint_every, kCheckpointReadShare * f.plain_ms + 1e-9);
    EXPECT_GT(f.audited_read_ms / (t.checkpoint_every - 1), kCheckpointReadShare * f.plain_ms);
    if (profile.id == "amd-ftpm-3") EXPECT_EQ(t.null_key, NullKeyLoad::kRecreate);  // 11.6 ms against 36 ms
    if (profile.id == "slb9670") {
      EXPECT_EQ(t.null_key, NullKeyLoad::kReload);  // 37 ms against 219 ms
      EXPECT_EQ(t.checkpoint_every, 350u);          // 22.26 ms read, 1% of 6.36 ms
    }
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
  costs.per_extend_ms = {{StrategyKind::kPerCommand, 149.3},
                         {StrategyKind::kSavedContext, 74.1},
                         {StrategyKind::kResident, 24.4},
                         {StrategyKind::kPlain, 6.4},
                         {StrategyKind::kCheckpoint, 6.6}};
  constexpr auto kDetection = ProtectionFloor::kDetection;
  constexpr auto kNone = ProtectionFloor::kNone;
  for (ProtectionFloor floor : {ProtectionFloor::kPrevention, kDetection, kNone}) {
    EXPECT_EQ(choose_strategy(costs, 1000, floor).extend, StrategyKind::kResident);  // cheapest prevention
    EXPECT_EQ(choose_strategy(costs, 30, floor).extend, StrategyKind::kResident);
  }
  // Over budget, the floor keeps prevention and says what would have fit.
  Calibration kept = choose_strategy(costs, 20);
  EXPECT_EQ(kept.extend, StrategyKind::kResident);
  EXPECT_FALSE(kept.fits);
  EXPECT_NE(kept.reason.find("the prevention floor keeps it; checkpoint would fit at 6.60 ms but only detects "
                             "(--allow-detection)"),
            std::string::npos)
      << kept.reason;
  EXPECT_EQ(choose_strategy(costs, 1).extend, StrategyKind::kResident);
  // Only when the operator allows it, below.
  EXPECT_EQ(choose_strategy(costs, 20, kDetection).extend, StrategyKind::kCheckpoint);
  EXPECT_EQ(choose_strategy(costs, 20, kNone).extend, StrategyKind::kCheckpoint);
  EXPECT_EQ(choose_strategy(costs, 6.5, kDetection).extend, StrategyKind::kCheckpoint);  // cheapest allowed
  EXPECT_NE(choose_strategy(costs, 6.5, kDetection)
                .floor_note.find("plain would fit at 6.40 ms but protects nothing "
                                 "(--allow-plain)"),
            std::string::npos);
  EXPECT_EQ(choose_strategy(costs, 6.5, kNone).extend, StrategyKind::kPlain);
  Calibration none = choose_strategy(costs, 1, kNone);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.extend, StrategyKind::kPlain);
  EXPECT_NE(none.reason.find("no strategy fits"), std::string::npos);
  EXPECT_EQ(choose_strategy(costs, 20, kNone).other, StrategyKind::kResident);
  // The candidates say which the floor refused.
  for (const auto& cand : kept.candidates) EXPECT_EQ(cand.allowed, prevents(cand.kind)) << strategy_name(cand.kind);
  costs.per_extend_ms.erase(StrategyKind::kResident);  // e.g. no free session slot
  EXPECT_EQ(choose_strategy(costs, 80).extend, StrategyKind::kSavedContext);
  // No prevention strategy measured (a run cut short): resident, not checkpoint.
  costs.per_extend_ms.erase(StrategyKind::kSavedContext);
  costs.per_extend_ms.erase(StrategyKind::kPerCommand);
  Calibration unmeasured = choose_strategy(costs, 20);
  EXPECT_EQ(unmeasured.extend, StrategyKind::kResident);
  EXPECT_NE(unmeasured.reason.find("no prevention strategy was measured"), std::string::npos) << unmeasured.reason;
}

TEST(Calibration, DeriveBelowTheFloorOnlyWhenAsked) {
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  for (ProtectionFloor floor : {ProtectionFloor::kDetection, ProtectionFloor::kNone}) {
    auto text = derive_policy(*profiles, kDefaultBudgetMs, "derive", floor);
    ASSERT_TRUE(text.ok()) << text.error().message();
    Policy p = operator_policy(*text);
    size_t checkpoint = 0, plain = 0;
    for (const PolicyRule& r : p.rules) {
      checkpoint += r.extend == StrategyKind::kCheckpoint;
      plain += r.extend == StrategyKind::kPlain;
      EXPECT_FALSE(r.trust_timings) << "derive never trusts bus timings for the operator";
    }
    EXPECT_GE(checkpoint, 3u);  // slb9670, slb9673, pluton, the measured rule
    EXPECT_EQ(plain > 0, floor == ProtectionFloor::kNone);
    EXPECT_NE(text->find("trust_timings = true"), std::string::npos) << "the measured rules say how to trust timings";
  }
}

TEST(Calibration, BenchJsonOfTheWrongShapeIsAnErrorNotAnException) {
  using nlohmann::json;
  for (const json& bad : {json(3), json{{"schema", 1}}, json{{"schema", "tpmsec-bench/1"}, {"strategies", "x"}},
                          json{{"schema", "tpmsec-bench/1"}, {"strategies", {{{"name", 7}}}}},
                          json{{"schema", "tpmsec-bench/1"},
                               {"strategies", {{{"name", "resident"}, {"per_extend_ms", {{"median", "fast"}}}}}}}}) {
    auto c = costs_from_bench_json(bad, "r.json");
    EXPECT_FALSE(c.ok()) << bad.dump();
  }
  json good = {{"schema", "tpmsec-bench/1"},
               {"strategies",
                {{{"name", "checkpoint"}, {"per_extend_ms", {{"n", 9}, {"median", 6.4}, {"mean", 6.6}}}},
                 {{"name", "resident"}, {"per_extend_ms", {{"n", 9}, {"median", 24.4}, {"mean", 25}}}}}},
               {"primitives", {{{"name", "StartAuthSession (ECC salt)"}, {"tpm_ms", {{"n", 3}, {"median", 84.7}}}}}}};
  auto c = costs_from_bench_json(good, "r.json");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->per_extend_ms.at(StrategyKind::kCheckpoint), 6.6);  // amortized: the mean
  EXPECT_EQ(c->per_extend_ms.at(StrategyKind::kResident), 24.4);
  EXPECT_EQ(c->start_session_ms, 84.7);
}

// ------------------------------------------------- an interposer on the bus

// The identity properties a TPM reports (TPM_PT_MANUFACTURER .. FIRMWARE_VERSION_2).
std::map<uint32_t, uint32_t> identity_properties(const TpmInfo& info) {
  std::map<uint32_t, uint32_t> m{{pt::kManufacturer, info.manufacturer_raw},
                                 {pt::kFirmwareVersion1, info.firmware_version_1},
                                 {pt::kFirmwareVersion2, info.firmware_version_2}};
  for (uint32_t i = 0; i < 4; ++i) m[pt::kVendorString1 + i] = info.vendor_raw[i];
  return m;
}

// Rewrites the values of the `forged` properties in a GetCapability
// (TPM_CAP_TPM_PROPERTIES) response, as an interposer would; returns how many.
size_t rewrite_properties(Bytes& rsp, const std::map<uint32_t, uint32_t>& forged) {
  if (rsp.size() < 10 || load_be32(&rsp[6]) != 0) return 0;
  bool sessions = (rsp[0] << 8 | rsp[1]) == st::kSessions;
  size_t at = 10 + (sessions ? 4 : 0) + 1;  // parameterSize, moreData
  if (rsp.size() < at + 8 || load_be32(&rsp[at]) != cap::kTpmProperties) return 0;
  uint32_t count = load_be32(&rsp[at + 4]);
  at += 8;
  size_t n = 0;
  for (uint32_t i = 0; i < count && at + 8 <= rsp.size(); ++i, at += 8) {
    auto it = forged.find(load_be32(&rsp[at]));
    if (it == forged.end()) continue;
    store_be32(&rsp[at + 4], it->second);
    ++n;
  }
  return n;
}

// An interposer: a FaultInjectingTransport that answers GetCapability itself
// (from the real TPM's answer) with the `forged` identity properties, in
// plain reads, and in audited ones too when `audited_too`.
class Interposer {
 public:
  explicit Interposer(Transport& inner)
      : inner_(inner),
        faults_(inner, [this](size_t, uint32_t code, ByteView command) { return hook(code, command); }) {}

  std::map<uint32_t, uint32_t> forged;
  bool audited_too = false;
  size_t rewritten = 0;      // property values rewritten
  size_t audited_reads = 0;  // GetCapability commands carrying a session

  Transport& transport() { return faults_; }
  const FaultCounters& counters() const { return faults_.counters(); }

 private:
  Fault hook(uint32_t code, ByteView command) {
    if (code != cc::kGetCapability) return Fault::pass();
    bool sessions = command.size() >= 2 && (command[0] << 8 | command[1]) == st::kSessions;
    audited_reads += sessions;
    if (forged.empty() || (sessions && !audited_too)) return Fault::pass();
    auto rsp = inner_.transmit(command);
    if (!rsp.ok()) return Fault::fail(true);
    Bytes answer = *rsp;
    rewritten += rewrite_properties(answer, forged);
    Fault f;
    f.execute = false;
    f.forged_response = std::move(answer);
    return f;
  }

  Transport& inner_;
  FaultInjectingTransport faults_;
};

// "MCHP" as TPM_PT_MANUFACTURER holds it.
constexpr uint32_t kMchp = 0x4D434850;

class ForgedIdentity : public testing::TpmTest {
 protected:
  void SetUp() override {
    TpmTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    interposer_ = std::make_unique<Interposer>(transport());
    bus_ = std::make_unique<Tpm>(interposer_->transport());
    // Behind the interposer the TPM is not in_process(): a salted session
    // needs a trusted salt key; this test trusts the first null key it sees.
    protection_.trust_first_use = true;
  }
  void TearDown() override {
    bus_.reset();
    interposer_.reset();
    TpmTest::TearDown();
  }

  // What a command learns from the plain reads over the bus (read_tpm_info).
  TpmFacts plain_facts() {
    auto info = read_tpm_info(*bus_);
    EXPECT_TRUE(info.ok()) << info.error().message();
    info_ = info.ok() ? *info : TpmInfo{};
    return facts_from_info(info_);
  }
  Result<PolicyDecision> decide_over_bus(const Policy& p, TpmFacts& f) {
    return decide_on_tpm(p, f, *bus_, protection_, &info_);
  }
  // Loaded sessions and transient objects, asked of the TPM directly.
  size_t loaded_handles() {
    size_t n = 0;
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstTransient}) {
      auto r = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      EXPECT_TRUE(r.ok());
      if (r.ok()) {
        for (uint32_t h : r->capability_data.handles) n += (h >> 24) == (first >> 24);
      }
    }
    return n;
  }

  std::unique_ptr<Interposer> interposer_;
  std::unique_ptr<Tpm> bus_;
  ProtectionConfig protection_;
  TpmInfo info_;
};

// The issue's attack, against the shipped policy: whatever identity the
// interposer makes the TPM report (each shipped profile's whole identity, or
// just each manufacturer the policy names), the decision is prevention, and
// no audited read is needed to keep it so.
TEST_P(ForgedIdentity, TheShippedPolicyNeverPicksPlainOrCheckpoint) {
  auto p = load_command_policy("");
  ASSERT_TRUE(p.ok()) << p.error().message();
  ASSERT_FALSE(p->operator_chosen);
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  std::vector<std::map<uint32_t, uint32_t>> forgeries;
  for (const LatencyProfile& profile : *profiles)
    forgeries.push_back(identity_properties(emulated_info(profile, {}).info));
  for (const PolicyRule& r : p->rules) {
    if (r.manufacturer) forgeries.push_back({{pt::kManufacturer, property_value(*r.manufacturer)}});
  }
  forgeries.push_back({{pt::kManufacturer, kMchp}});
  for (const auto& forged : forgeries) {
    interposer_->forged = forged;
    TpmFacts f = plain_facts();
    ASSERT_EQ(f.manufacturer, property_text(forged.at(pt::kManufacturer))) << "the forgery did not take";
    size_t before = interposer_->counters().commands;
    auto d = decide_over_bus(*p, f);
    ASSERT_TRUE(d.ok()) << d.error().message();
    EXPECT_TRUE(prevents(d->extend) && prevents(d->other))
        << f.manufacturer << " " << f.vendor << ": rule " << d->rule->name << " chose " << strategy_name(d->extend);
    EXPECT_EQ(interposer_->counters().commands, before) << "no TPM command is needed to keep prevention";
  }
  EXPECT_EQ(interposer_->audited_reads, 0u);
  EXPECT_GT(interposer_->rewritten, 0u);
}

// An operator's file lowers protection for MCHP; the interposer makes a TPM
// that is not one report MCHP: the audited read disagrees, exit 3 in the CLI.
TEST_P(ForgedIdentity, AForgedIdentityTheAuditedReadContradictsIsAnIntegrityError) {
  Policy p = operator_policy(kLowering);
  interposer_->forged = {{pt::kManufacturer, kMchp}};
  TpmFacts f = plain_facts();
  ASSERT_EQ(f.manufacturer, "MCHP");
  auto d = decide_over_bus(p, f);
  ASSERT_FALSE(d.ok()) << "decided " << strategy_name(d->extend);
  EXPECT_EQ(d.error().kind(), ErrorKind::kIntegrity) << d.error().message();
  EXPECT_NE(d.error().message().find("identity read through an audited session (manufacturer \"IBM\""),
            std::string::npos)
      << d.error().message();
  EXPECT_NE(d.error().message().find("differs from the plain read (manufacturer \"MCHP\""), std::string::npos);
  EXPECT_EQ(interposer_->audited_reads, 1u);
  EXPECT_EQ(loaded_handles(), 0u) << "the audit session ends with its command";
}

// An interposer that rewrites the audited answer as well breaks its response HMAC.
TEST_P(ForgedIdentity, AForgedAuditedAnswerFailsItsResponseHmac) {
  Policy p = operator_policy(kLowering);
  interposer_->forged = {{pt::kManufacturer, kMchp}};
  interposer_->audited_too = true;
  TpmFacts f = plain_facts();
  auto d = decide_over_bus(p, f);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().kind(), ErrorKind::kIntegrity) << d.error().message();
  EXPECT_NE(d.error().message().find("response HMAC"), std::string::npos) << d.error().message();
  EXPECT_EQ(interposer_->audited_reads, 1u);
  EXPECT_GE(interposer_->rewritten, 2u);  // the plain read and the audited one
}

// --unsalted: an unsalted audit session proves nothing to a party that saw it
// start, so the identity stays unauthenticated and the floor stays.
TEST_P(ForgedIdentity, WithoutASaltedSessionTheFloorStays) {
  Policy p = operator_policy(kLowering);
  interposer_->forged = {{pt::kManufacturer, kMchp}};
  protection_.unsalted = true;
  TpmFacts f = plain_facts();
  auto d = decide_over_bus(p, f);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->extend, StrategyKind::kResident);
  EXPECT_EQ(d->lifted_extend, StrategyKind::kPlain);
  EXPECT_NE(d->floor_reason.find("--unsalted"), std::string::npos) << d->floor_reason;
  EXPECT_EQ(interposer_->audited_reads, 0u);
}

// The genuine identity: the audited read confirms it and the operator's rule
// stands. What that costs: the TPM commands of one audited read.
TEST_P(ForgedIdentity, AGenuineIdentityIsConfirmedByOneAuditedRead) {
  Policy p = operator_policy(
      "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"rig\"\nmanufacturer = \"IBM\"\nvendor = \"SW*\"\n"
      "extend = \"plain\"\nreason = \"test rig\"\n[[rule]]\nname = \"default\"\nextend = \"resident\"\n"
      "reason = \"protect\"\n");
  TpmFacts f = plain_facts();
  ASSERT_EQ(f.manufacturer, "IBM");
  size_t before = interposer_->counters().commands;
  auto d = decide_over_bus(p, f);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->extend, StrategyKind::kPlain);
  EXPECT_FALSE(d->lifted_extend);
  EXPECT_EQ(f.identity_origin, FactOrigin::kAudited);
  EXPECT_EQ(interposer_->audited_reads, 1u);
  size_t commands = interposer_->counters().commands - before;
  RecordProperty("audited_identity_commands", static_cast<int>(commands));
  // CreatePrimary, ContextSave, FlushContext (the salt key); ContextLoad,
  // StartAuthSession, FlushContext (the session); the audited GetCapability;
  // and, behind a bus, the handle ledger's baseline before the first creating
  // command: GetCapability(TPM_CAP_HANDLES) for transients, loaded and saved
  // sessions (handle_ledger.h).
  EXPECT_EQ(commands, 10u);
  EXPECT_EQ(loaded_handles(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Bus, ForgedIdentity, ::testing::Values(testing::TpmKind::kEmbedded, testing::TpmKind::kSwtpm),
                         testing::tpm_kind_param_name);

// Serves TPM commands on a Unix socket, which `--tpm swtpm:path=SOCKET`
// reaches, through `bus`: the CLI talks to a TPM whose bus this test owns.
class SocketBus {
 public:
  explicit SocketBus(Transport& bus) : bus_(bus) {}
  ~SocketBus() {
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  bool start() {
    path_ = fmt::format("{}/policy-bus-{}.sock", ::testing::TempDir(), ::getpid());
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (listen_fd_ < 0 || path_.size() >= sizeof(addr.sun_path)) return false;
    std::copy(path_.begin(), path_.end(), addr.sun_path);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return false;
    if (::listen(listen_fd_, 1) != 0) return false;
    thread_ = std::thread([this] {
      for (;;) {
        int fd = ::accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) return;  // shut down
        serve(fd);
        ::close(fd);
      }
    });
    return true;
  }
  std::string spec() const { return "swtpm:path=" + path_; }

 private:
  static bool read_all(int fd, uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t got = ::read(fd, p, n);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  void serve(int fd) {
    for (;;) {
      Bytes command(10);
      if (!read_all(fd, command.data(), 10)) return;
      uint32_t size = load_be32(&command[2]);
      if (size < 10 || size > 64 * 1024) return;
      command.resize(size);
      if (!read_all(fd, command.data() + 10, size - 10)) return;
      auto rsp = bus_.transmit(command);
      if (!rsp.ok()) return;
      if (::write(fd, rsp->data(), rsp->size()) != static_cast<ssize_t>(rsp->size())) return;
    }
  }

  Transport& bus_;
  std::string path_;
  int listen_fd_ = -1;
  std::thread thread_;
};

// In a file of this process's own: ctest runs the test's variants (and other
// tests writing policies) at the same time, and a policy file another process
// is rewriting may be read half-written.
// The files go when the process ends (a test process runs one test).
class PolicyFiles {
 public:
  ~PolicyFiles() {
    for (const auto& p : paths_) std::filesystem::remove(p);
  }
  std::string write(const std::string& name, std::string_view text) {
    std::string path = fmt::format("{}/{}-{}", ::testing::TempDir(), ::getpid(), name);
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }

 private:
  std::vector<std::string> paths_;
};

std::string write_policy(const std::string& name, std::string_view text) {
  static PolicyFiles files;
  return files.write(name, text);
}

// The same attack through the tpmsec binary: the CLI reaches the TPM over a
// socket whose far end rewrites TPM_PT_MANUFACTURER to MCHP.
TEST_P(ForgedIdentity, CliRefusesAForgedIdentityAndNamesWhatItUses) {
  SocketBus socket_bus(interposer_->transport());
  ASSERT_TRUE(socket_bus.start());
  auto key = NullKey::create(tpm(), SaltKind::kEcc);  // the trusted salt key, learnt off the bus
  ASSERT_TRUE(key.ok()) << key.error().message();
  const std::string pin = key->name_hex();
  const std::string digest(64, 'c');
  Bytes digest_bytes(32, 0xcc);
  auto pcr16 = [&] {
    auto v = pcr_read(tpm(), alg::kSha256, 16);
    EXPECT_TRUE(v.ok());
    return v.ok() ? *v : Bytes{};
  };
  auto extended = [&](const Bytes& from) {
    auto v = pcr_extended_value(alg::kSha256, from, digest_bytes);
    return v.ok() ? *v : Bytes{};
  };
  const std::string mchp = write_policy("policy-mchp.toml", kLowering);
  const std::string ibm = write_policy(
      "policy-ibm.toml",
      "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"rig\"\nmanufacturer = \"IBM\"\nextend = \"plain\"\n"
      "reason = \"test rig\"\n[[rule]]\nname = \"default\"\nextend = \"resident\"\nreason = \"protect\"\n");
  // What one run keeps for the next (session_cache.h) is this test's own.
  const std::string state = ::testing::TempDir() + "forged-identity-" + std::to_string(static_cast<int>(GetParam()));
  std::filesystem::remove_all(state);
  const std::vector<std::string> env{"TPMSEC_STATE_DIR=" + state};
  auto extend = [&](std::vector<std::string> more) {
    std::vector<std::string> args = {"pcr", "extend", "16", digest, "--tpm", socket_bus.spec(), "--null-name", pin};
    args.insert(args.end(), more.begin(), more.end());
    return run_tpmsec(args, env);
  };

  interposer_->forged = {{pt::kManufacturer, kMchp}};
  // The operator's MCHP rule on a forged MCHP: the audited read says IBM.
  Bytes before = pcr16();
  auto r = extend({"--policy", mchp});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("differs from the plain read"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(pcr16(), before) << "nothing was extended";

  // --unsalted: no audited read is possible; the floor keeps prevention and says why.
  r = extend({"--policy", mchp, "--unsalted"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rule 'slow-microchip' chose plain for extends, but"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--unsalted: an unsalted audit session is forgeable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("using resident"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("tpmsec: strategy plain"), std::string::npos) << r.err;
  EXPECT_EQ(pcr16(), extended(before));

  // The shipped policy on the forged MCHP: prevention, no audited read, no notice.
  before = pcr16();
  size_t audited = interposer_->audited_reads;
  r = extend({"-v"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("rule 'attpm20p'"), std::string::npos) << r.err;       // the forgery steered the rule...
  EXPECT_NE(r.err.find("resident for extends"), std::string::npos) << r.err;  // ...among prevention only
  EXPECT_EQ(r.err.find("tpmsec: strategy "), std::string::npos) << r.err;
  EXPECT_EQ(pcr16(), extended(before));
  EXPECT_EQ(interposer_->audited_reads, audited) << "no audited identity read: nothing lowers protection";

  // No forgery: the genuine IBM identity is confirmed, and plain is named on
  // stderr. The plain read is kept for the boot (session_cache.h), so the
  // forged one is forgotten first, as an operator would after removing an
  // interposer.
  interposer_->forged.clear();
  auto forget = run_tpmsec({"null-key", "--forget", "--tpm", socket_bus.spec()}, env);
  ASSERT_EQ(forget.exit_code, 0) << forget.err;
  before = pcr16();
  r = extend({"--policy", ibm});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(fmt::format("tpmsec: strategy plain (policy {} rule 'rig'): extends are not protected against "
                                   "a bus interposer",
                                   ibm)),
            std::string::npos)
      << r.err;
  EXPECT_EQ(pcr16(), extended(before));
}

// ------------------------------------------------------------------ CLI

std::string decision_line(const std::string& out) {
  size_t at = out.find("decision");
  return at == std::string::npos ? "" : out.substr(at, out.find('\n', at) - at);
}

// A run cut short never decides: per-command's 10,000 ECC-salted
// StartAuthSessions cannot be measured in 0.2 s on any machine, so this run is
// always partial (or empty).
TEST(PolicyCli, CalibrateNeverDecidesFromAPartialRun) {
  auto r = run_tpmsec({"policy", "calibrate", "--emulate", "attpm20p", "--iterations", "10000", "--max-seconds", "0.2",
                       "--allow-plain"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out.find("[[rule]]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("decision"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.find("No decision and no rule from a partial run") != std::string::npos ||
              r.err.find("calibration measured nothing") != std::string::npos)
      << r.err;
}

// A limit shorter than the deadline's 50 ms poll: the deadline fires at the
// limit itself, so a run that takes longer than 1 ms (five strategies' null
// keys, salted sessions and 60 extends on the reference TPM always do) stops
// there and decides nothing. Before, such a run measured everything and
// decided.
TEST(PolicyCli, CalibrateStopsAtAShortLimit) {
  auto r = run_tpmsec({"policy", "calibrate", "--emulate", "slb9670", "--max-seconds", "0.001", "--allow-plain"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.out.find("decision"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[[rule]]"), std::string::npos) << r.out;
  EXPECT_TRUE(r.err.find("No decision and no rule from a partial run") != std::string::npos ||
              r.err.find("calibration measured nothing") != std::string::npos)
      << r.err;
}

TEST(PolicyCli, CalibrateFollowsTheBudgetAboveTheFloor) {
  struct Case {
    const char* budget;
    const char* allow;
    const char* extend;
  } cases[] = {{"1000", "", "resident"},
               {"30", "", "resident"},
               {"20", "", "resident"},  // over budget: the floor keeps prevention
               {"5", "", "resident"},
               {"20", "--allow-detection", "checkpoint"},
               {"5", "--allow-detection", "checkpoint"},
               {"5", "--allow-plain", "plain"}};
  for (const Case& c : cases) {
    std::vector<std::string> args = {"policy", "calibrate", "--emulate", "slb9670", "--budget-ms", c.budget};
    if (*c.allow) args.push_back(c.allow);
    auto r = run_tpmsec(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(decision_line(r.out).find(fmt::format("PCR extends: {} ", c.extend)), std::string::npos)
        << "budget " << c.budget << " " << c.allow << ": " << r.out;
    EXPECT_NE(r.out.find("linux "), std::string::npos);
    bool weak = std::string(c.extend) != "resident";
    // Below prevention: what it gives up, on stdout, in the pasted rule's comment, and on stderr.
    EXPECT_EQ(r.out.find("gives up    ") != std::string::npos, weak) << r.out;
    EXPECT_EQ(r.out.find("# BELOW PREVENTION: ") != std::string::npos, weak) << r.out;
    EXPECT_EQ(r.err.find(fmt::format("tpmsec: strategy {} (calibrate {}): ", c.extend, c.allow)) != std::string::npos,
              weak)
        << r.err;
  }
  auto r = run_tpmsec({"policy", "calibrate", "--emulate", "slb9670"});
  EXPECT_NE(r.out.find("checkpoint would fit at"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(below the floor)"), std::string::npos) << r.out;
}

TEST(PolicyCli, CalibratedRulePastesIntoAPolicy) {
  for (const char* allow : {"", "--allow-detection"}) {
    std::vector<std::string> args = {"policy", "calibrate", "--emulate", "pluton"};
    if (*allow) args.push_back(allow);
    auto r = run_tpmsec(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    size_t at = r.out.find("# Policy rule");
    ASSERT_NE(at, std::string::npos) << r.out;
    std::string text = kHead + r.out.substr(at) + kDefault;
    Policy p = operator_policy(text, "pasted.toml");
    ASSERT_FALSE(p.rules.empty()) << text;
    EXPECT_EQ(decide(p, facts("MSFT", "Pluton.TPM.A", "6.3")).rule, &p.rules[0]);
    // Pluton (TPMScan): resident 43.4 ms > 20 (HMAC 27.9 ms): checkpoint only when allowed, marked when it is.
    EXPECT_EQ(p.rules[0].extend, *allow ? StrategyKind::kCheckpoint : StrategyKind::kResident) << allow;
    EXPECT_EQ(text.find("# BELOW PREVENTION: checkpoint: detects, does not prevent") != std::string::npos, *allow != 0);
  }
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
    const SessionTuning t = tuning_from_profile(profile, SaltKind::kEcc);
    EXPECT_NE(r.out.find(fmt::format("sessions    null key {}, checkpoint every {};", null_key_load_name(t.null_key),
                                     t.checkpoint_every)),
              std::string::npos)
        << profile.id << ": " << r.out;
  }
}

TEST(PolicyCli, ShowUsesMeasurementsFromABenchResult) {
  const std::string json = write_policy("policy-bench.json", "");  // the bench result, removed with the policies
  auto b = run_tpmsec({"bench", "--emulate", "slb9673", "--iterations", "3", "--no-primitives", "--json", json});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  // The embedded TPM (IBM) matches no named rule; its measured figures (those
  // of the slb9673 model) are over budget, so the operator's measured rule
  // matches, but bench timings may be inflated by an interposer: the floor
  // keeps prevention unless the rule trusts them.
  const std::string timed = write_policy("policy-timed.toml", kTimed);
  auto r = run_tpmsec({"policy", "show", "--measurements", json, "--policy", timed});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("slow-when-measured           line 2    MATCHES"), std::string::npos) << r.out;
  EXPECT_NE(decision_line(r.out).find("PCR extends: resident"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("floor       the rule chose checkpoint"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("trust_timings = true"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rests on    policy " + timed + " (chosen by the operator); timings: extend_hmac_ms"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("tpmsec: strategy "), std::string::npos) << r.err;

  std::string trusting(kTimed);
  trusting.replace(trusting.find("reason = \"over budget\""), 0, "trust_timings = true\n");
  r = run_tpmsec(
      {"policy", "show", "--measurements", json, "--policy", write_policy("policy-trusting.toml", trusting)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(decision_line(r.out).find("PCR extends: checkpoint"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("tpmsec: strategy checkpoint (policy "), std::string::npos) << r.err;

  // The shipped policy has no rule on measurements below prevention at all.
  r = run_tpmsec({"policy", "show", "--measurements", json});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(decision_line(r.out).find("PCR extends: resident"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the shipped default"), std::string::npos) << r.out;
}

TEST(PolicyCli, CheckNamesRulesBelowPrevention) {
  auto r = run_tpmsec({"policy", "check", write_policy("policy-deny.toml", kDenyList)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tpmsec: strategy plain (rule 'slow-infineon' (line 3)): extends are not protected"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("tpmsec: strategy checkpoint (rule 'slow-when-measured' (line 11)): detects"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("takes effect only from a policy file you choose"), std::string::npos) << r.err;
  r = run_tpmsec({"policy", "check", shipped_policy_path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(PolicyCli, MalformedPolicyIsAUsageError) {
  std::string path = ::testing::TempDir() + "/bad-policy.toml";
  std::ofstream(path) << kHead << "[[rule]]\nname = \"a\"\nextend = \"residnet\"\nreason = \"r\"\n";
  for (auto args :
       {std::vector<std::string>{"policy", "check", path}, std::vector<std::string>{"policy", "show", "--policy", path},
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
  EXPECT_NE(r.err.find("resident for extends"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tpmsec: the decision rests on: policy "), std::string::npos) << r.err;

  r = run_tpmsec({"pcr", "extend", "16", digest, "--emulate", "st33ktpm2x", "--verbose"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("resident for extends"), std::string::npos) << r.err;

  r = run_tpmsec({"pcr", "extend", "16", digest, "--emulate", "slb9670", "--strategy", "per-command", "-v"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The strategy is the operator's; only how its sessions run comes from the policy.
  EXPECT_EQ(r.err.find("for extends"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("decision rests on"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sessions on this TPM (policy "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("tpmsec: strategy"), std::string::npos) << r.err;

  // The operator's --strategy below prevention: allowed, and named.
  r = run_tpmsec({"pcr", "extend", "16", digest, "--strategy", "plain"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tpmsec: strategy plain (operator's --strategy): extends are not protected against a bus "
                       "interposer"),
            std::string::npos)
      << r.err;
  r = run_tpmsec({"pcr", "extend", "16", digest, "--protect", "none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tpmsec: strategy plain (operator's --strategy)"), std::string::npos) << r.err;
  r = run_tpmsec({"pcr", "extend", "16", digest, "--strategy", "checkpoint"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tpmsec: strategy checkpoint (operator's --strategy): detects, does not prevent, a dropped or "
                       "substituted extend; on resettable PCRs 16/23 a reset followed by a replay is not detected"),
            std::string::npos)
      << r.err;

  r = run_tpmsec({"pcr", "extend", "16", digest, "--strategy", "bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown strategy 'bogus'"), std::string::npos) << r.err;
  r = run_tpmsec({"pcr", "extend", "16", digest, "--strategy", "plain", "--protect", "hmac"});
  EXPECT_EQ(r.exit_code, 2);
}

// The shipped policy picks prevention for every shipped profile, and with no
// profile for the embedded TPM itself.
TEST(PolicyCli, PcrExtendWithTheShippedPolicyPreventsOnEveryProfile) {
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok());
  std::vector<std::vector<std::string>> runs = {{}};
  for (const LatencyProfile& profile : *profiles) runs.push_back({"--emulate", profile.id});
  for (const auto& more : runs) {
    std::vector<std::string> args = {"pcr", "extend", "16", std::string(64, 'd'), "-v"};
    args.insert(args.end(), more.begin(), more.end());
    auto r = run_tpmsec(args);
    std::string what = more.empty() ? "embedded" : more[1];
    ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
    EXPECT_EQ(r.err.find("tpmsec: strategy "), std::string::npos) << what << ": " << r.err;
    EXPECT_TRUE(r.err.find("resident for extends") != std::string::npos ||
                r.err.find("saved-context for extends") != std::string::npos ||
                r.err.find("per-command for extends") != std::string::npos)
        << what << ": " << r.err;
    EXPECT_EQ(r.err.find("chose plain"), std::string::npos) << what << ": " << r.err;
    EXPECT_EQ(r.err.find("chose checkpoint"), std::string::npos) << what << ": " << r.err;
  }
}

// An operator's file on a genuine identity: the emulated ATTPM20P (the
// profile's identity is authentic by construction) and the embedded TPM's
// own IBM (no bus), through --policy and $TPMSEC_POLICY.
TEST(PolicyCli, AnOperatorsFileLowersProtectionOnAGenuineIdentityAndSaysSo) {
  const std::string mchp = write_policy("policy-mchp-cli.toml", kLowering);
  const std::string digest(64, 'e');
  auto r = run_tpmsec({"pcr", "extend", "16", digest, "--emulate", "attpm20p", "--policy", mchp});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(fmt::format("tpmsec: strategy plain (policy {} rule 'slow-microchip'): extends are not "
                                   "protected against a bus interposer",
                                   mchp)),
            std::string::npos)
      << r.err;
  r = run_tpmsec({"pcr", "extend", "16", digest, "--emulate", "slb9670", "--policy", mchp});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("tpmsec: strategy "), std::string::npos) << r.err;

  const std::string ibm = write_policy(
      "policy-ibm-cli.toml",
      "schema = \"tpmsec-policy/1\"\n[[rule]]\nname = \"rig\"\nmanufacturer = \"IBM\"\nextend = \"checkpoint\"\n"
      "reason = \"test rig\"\n[[rule]]\nname = \"default\"\nextend = \"resident\"\nreason = \"protect\"\n");
  r = run_tpmsec({"pcr", "extend", "16", digest, "-v"}, {"TPMSEC_POLICY=" + ibm});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(fmt::format("tpmsec: strategy checkpoint (policy {} rule 'rig'): detects", ibm)),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("identity: manufacturer, vendor, firmware (embedded TPM, no bus)"), std::string::npos) << r.err;
  // policy show decides the same, and names it too.
  r = run_tpmsec({"policy", "show", "--policy", ibm});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tpmsec: strategy checkpoint (policy "), std::string::npos) << r.err;
}

TEST(PolicyCli, BenchNamesWhatACheckpointRecommendationGivesUp) {
  // Under the prevention floor, checkpoint is never the recommendation: with
  // no prevention strategy measured, bench says what to measure.
  auto r = run_tpmsec(
      {"bench", "--emulate", "slb9670", "--iterations", "3", "--no-primitives", "--strategies", "plain,checkpoint"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("recommendation: none of the measured strategies is allowed by the prevention floor"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.err.find("tpmsec: strategy "), std::string::npos) << r.err;
  // Allowed by the operator: recommended, and named with what it gives up.
  r = run_tpmsec({"bench", "--emulate", "slb9670", "--iterations", "3", "--no-primitives", "--strategies",
                  "plain,checkpoint", "--allow-detection"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("recommendation: checkpoint (detection)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("tpmsec: strategy checkpoint (bench's recommendation --allow-detection): detects, does not "
                       "prevent"),
            std::string::npos)
      << r.err;
  r = run_tpmsec(
      {"bench", "--emulate", "slb9670", "--iterations", "3", "--no-primitives", "--strategies", "resident,checkpoint"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("tpmsec: strategy "), std::string::npos) << r.err;
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
