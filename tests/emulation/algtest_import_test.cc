// Profiles from tpm2-algtest results (TPMScan runs in tests/data/tpmscan):
// identity, M tags with runs and iterations, per-iteration distributions,
// slots and CONTEXT_GAP_MAX from the TPM's properties, the outlier rule,
// one-line errors for bad directories, and the derivation rules' error
// against the SLB9670 values the seed thread measured (data/profiles/slb9670.json).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "support/run_command.h"
#include "tpmsec/emulation/algtest_import.h"
#include "tpmsec/emulation/profile_file.h"

namespace tpmsec {
namespace {

namespace fs = std::filesystem;
using testing::run_tpmsec;

const std::string kData = std::string(TPMSEC_TEST_DATA) + "/tpmscan";
const std::string kSlbDir = kData + "/IFX/7.85.17.51968";
const std::string kSlbRun = kSlbDir + "/08836af27dda9f32";

std::vector<std::string> runs_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<AlgtestRun> read_all(const std::vector<std::string>& dirs) {
  std::vector<AlgtestRun> runs;
  for (const std::string& d : dirs) {
    auto r = read_algtest_run(d);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (r.ok()) runs.push_back(*r);
  }
  return runs;
}

AlgtestImport import(const std::vector<std::string>& dirs, std::optional<LatencyProfile> keep = std::nullopt) {
  AlgtestImportOptions o;
  o.id = "test";
  o.source = "TPMScan";
  o.keep = std::move(keep);
  auto r = profile_from_algtest(read_all(dirs), o);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : AlgtestImport{};
}

TEST(AlgtestImport, ReadsIdentityOperationsAndProperties) {
  auto run = read_algtest_run(kSlbRun);
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(run->label, "IFX/7.85.17.51968/08836af27dda9f32");
  EXPECT_EQ(run->manufacturer, "IFX");
  EXPECT_EQ(run->vendor_strings[0], "SLB9");
  EXPECT_EQ(run->vendor_strings[1], "670");
  EXPECT_EQ(run->firmware, "7.85");
  EXPECT_EQ(run->firmware_full, "7.85.17.51968");
  EXPECT_EQ(run->device, "ArcherCity");
  // Capability_properties-fixed.txt of this run: 3 loaded sessions, 4 transient objects, 64, 0xFFFF.
  EXPECT_EQ(run->loaded_sessions, 3u);
  EXPECT_EQ(run->transient_objects, 4u);
  EXPECT_EQ(run->active_sessions_max, 64u);
  EXPECT_EQ(run->context_gap_max, 0xFFFFu);
  // performance.yaml: GetRandom avg 4.00 over 1000, HMAC 14.61, ECDSA P-256 71.68, OAEP 192.00.
  ASSERT_TRUE(run->ops.count("GetRandom"));
  EXPECT_DOUBLE_EQ(run->ops.at("GetRandom").avg_ms, 4.00);
  EXPECT_EQ(run->ops.at("GetRandom").iterations, 1000u);
  EXPECT_DOUBLE_EQ(run->ops.at("HMAC").avg_ms, 14.61);
  EXPECT_DOUBLE_EQ(run->ops.at("Sign.ecdsa_p256").avg_ms, 71.68);
  EXPECT_DOUBLE_EQ(run->ops.at("RSA_Decrypt.oaep_2048").avg_ms, 192.00);
  // The SLB9670 does not do ZGen_2Phase successfully in TPMScan: no such op.
  EXPECT_FALSE(run->ops.count("ZGen_2Phase.p256"));
  // Per-iteration samples where the CSV was kept, none elsewhere.
  EXPECT_EQ(run->ops.at("GetRandom").samples_ms.size(), 1000u);
  EXPECT_TRUE(run->ops.at("Sign.ecdsa_p256").samples_ms.empty());
}

TEST(AlgtestImport, MergedProfileTagsMeasuredValuesWithRunsAndIterations) {
  AlgtestImport imp = import(runs_in(kSlbDir));
  const LatencyProfile& p = imp.profile;
  EXPECT_EQ(imp.used.size(), 6u);
  EXPECT_TRUE(imp.excluded.empty());
  EXPECT_EQ(p.identity.manufacturer, "IFX");
  EXPECT_EQ(p.identity.firmware, "7.85");
  const LatencyValue& rnd = p.commands.at("GetRandom");
  EXPECT_EQ(rnd.tag, kTagMeasured);
  EXPECT_EQ(rnd.runs, 6u);
  EXPECT_EQ(rnd.iterations, 6000u);
  // Run averages 3.96, 4.00, 4.01, 4.50, 4.50, 4.50: median 4.255, range 3.96-4.50.
  EXPECT_NEAR(rnd.ms, 4.255, 1e-9);
  ASSERT_TRUE(rnd.low_ms && rnd.high_ms);
  EXPECT_DOUBLE_EQ(*rnd.low_ms, 3.96);
  EXPECT_DOUBLE_EQ(*rnd.high_ms, 4.50);
  EXPECT_NE(rnd.source.find("IFX/7.85.17.51968/"), std::string::npos);
  EXPECT_EQ(p.commands.at("Hash").tag, kTagMeasured);
  EXPECT_EQ(p.commands.at("CreatePrimary.ecc").tag, kTagProxy);
  for (const char* v : {"PCR_Extend", "FlushContext", "StartAuthSession.ecc", "StartAuthSession.rsa"}) {
    EXPECT_EQ(p.commands.at(v).tag, kTagDerived) << v;
    EXPECT_NE(p.commands.at(v).note.find("rule A"), std::string::npos) << v;
  }
  EXPECT_EQ(p.hmac_session.tag, kTagDerived);
  // The ECC salt rule falls back to ECDSA on the SLB9670 (no ECDH measured) and says so.
  EXPECT_NE(p.commands.at("StartAuthSession.ecc").note.find("ECDSA"), std::string::npos);
  // Every value loads back through the strict profile parser, extensions included.
  auto again = profile_from_json(to_json(p), "round trip");
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ(*again, p);
}

TEST(AlgtestImport, DistributionFromPerIterationData) {
  AlgtestImport imp = import({kSlbRun});
  const LatencyValue& rnd = imp.profile.commands.at("GetRandom");
  ASSERT_TRUE(rnd.distribution.has_value());
  EXPECT_EQ(rnd.distribution->n, 1000u);
  EXPECT_LE(rnd.distribution->p5_ms, rnd.distribution->median_ms);
  EXPECT_LE(rnd.distribution->median_ms, rnd.distribution->p95_ms);
  EXPECT_LE(rnd.distribution->p95_ms, rnd.distribution->max_ms);
  // performance.yaml's min/avg/max for this run: 3.86 / 4.00 / 5.01.
  EXPECT_GE(rnd.distribution->p5_ms, 3.86 - 1e-6);
  EXPECT_LE(rnd.distribution->max_ms, 5.01 + 0.005);
  EXPECT_NEAR(rnd.distribution->median_ms, 4.0, 0.3);
  // RSA key generation: median as the value, the slowest 5% as a tail event.
  const LatencyValue& rsa = imp.profile.commands.at("CreatePrimary.rsa");
  ASSERT_TRUE(rsa.distribution.has_value());
  EXPECT_DOUBLE_EQ(rsa.ms, rsa.distribution->median_ms);
  ASSERT_EQ(imp.profile.tail_events.size(), 1u);
  EXPECT_EQ(imp.profile.tail_events[0].variant, "CreatePrimary.rsa");
  EXPECT_GT(imp.profile.tail_events[0].extra_ms, rsa.ms);  // the top 5% average over twice the median
  // No CSV for ECDSA: no distribution.
  EXPECT_FALSE(imp.profile.commands.at("StartAuthSession.ecc").distribution.has_value());
}

TEST(AlgtestImport, SlotsAndContextGapFromTheTpm) {
  AlgtestImport slb = import(runs_in(kSlbDir));
  EXPECT_EQ(slb.profile.slots.max_loaded_sessions, 3u);
  EXPECT_EQ(slb.profile.slots.max_transient_objects, 4u);
  EXPECT_EQ(slb.profile.slots.active_sessions_max, 64u);
  EXPECT_EQ(slb.profile.slots.context_gap_max, 0xFFFFu);
  AlgtestImport ntc = import(runs_in(kData + "/NTC/7.2.0.1"));
  EXPECT_EQ(ntc.profile.slots.max_loaded_sessions, 3u);
  EXPECT_EQ(ntc.profile.slots.context_gap_max, 0xFFFFu);
  // Firmware 7.2.2 of the same line: 5 slots, gap 255. Merged, each limit is
  // the strictest reported, and the note names what each run said.
  std::vector<std::string> line = runs_in(kData + "/NTC/7.2.0.1");
  line.push_back(kData + "/NTC/7.2.2.0/facaf45349ab8c41");
  AlgtestImport merged = import(line);
  EXPECT_EQ(merged.profile.slots.max_loaded_sessions, 3u);
  EXPECT_EQ(merged.profile.slots.max_transient_objects, 3u);
  EXPECT_EQ(merged.profile.slots.active_sessions_max, 64u);
  EXPECT_EQ(merged.profile.slots.context_gap_max, 0xFFu);
  EXPECT_NE(merged.profile.slots.note.find("3/3/64/65535 x4, 5/5/64/255 x1"), std::string::npos)
      << merged.profile.slots.note;
}

TEST(AlgtestImport, OutlierRule) {
  // Three or more runs: > 3 scaled MADs and > 25% from the median.
  EXPECT_EQ(outlier_runs({2.99, 2.67, 2.67, 2.97, 38.70}), (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(outlier_runs({4.0, 4.5, 4.0}), (std::vector<bool>{false, false, false}));
  // Far in MADs but within 25%: kept (identical runs make the MAD zero).
  EXPECT_EQ(outlier_runs({4.0, 4.0, 4.0, 4.6}), (std::vector<bool>{false, false, false, false}));
  // Two runs: nothing to compare against.
  EXPECT_EQ(outlier_runs({2.0, 40.0}), (std::vector<bool>{false, false}));

  std::vector<std::string> dirs = runs_in(kData + "/NTC/7.2.0.1");
  dirs.push_back(kData + "/NTC/7.2.3.1/040b385a9b8030b8");
  AlgtestImport imp = import(dirs);
  ASSERT_EQ(imp.excluded.size(), 1u);
  EXPECT_NE(imp.excluded[0].find("NTC/7.2.3.1/040b385a9b8030b8"), std::string::npos) << imp.excluded[0];
  EXPECT_EQ(imp.used.size(), 4u);
  EXPECT_EQ(imp.profile.commands.at("GetRandom").runs, 4u);
  EXPECT_LT(imp.profile.commands.at("GetRandom").ms, 3.5);  // the 38.7 ms run is not in it
}

TEST(AlgtestImport, BadDirectoriesAreOneLineUsageErrors) {
  fs::path tmp = fs::temp_directory_path() / ("tpmsec-algtest-" + std::to_string(::getpid()));
  fs::create_directories(tmp / "empty");
  fs::create_directories(tmp / "noprops");
  fs::copy_file(kSlbRun + "/performance.yaml", tmp / "noprops" / "performance.yaml");
  struct Case {
    std::string dir;
    std::string expect;
  };
  for (const Case& c : {Case{(tmp / "missing").string(), "not a directory"},
                        Case{(tmp / "empty").string(), "no readable performance.yaml"},
                        Case{(tmp / "noprops").string(), "Capability_properties-fixed.txt"}}) {
    auto r = read_algtest_run(c.dir);
    ASSERT_FALSE(r.ok()) << c.dir;
    EXPECT_EQ(r.error().kind(), ErrorKind::kUsage);
    EXPECT_NE(r.error().message().find(c.expect), std::string::npos) << r.error().message();
    auto cli = run_tpmsec({"profile", "from-algtest", kSlbRun, c.dir});
    EXPECT_EQ(cli.exit_code, testing::kExitUsage) << testing::describe(cli);
    EXPECT_NE(cli.err.find(c.expect), std::string::npos) << cli.err;
    EXPECT_EQ(std::count(cli.err.begin(), cli.err.end(), '\n'), 1) << cli.err;
  }
  // Runs of two manufacturers are refused.
  auto mixed = run_tpmsec({"profile", "from-algtest", kSlbRun, kData + "/NTC/7.2.3.1/040b385a9b8030b8"});
  EXPECT_EQ(mixed.exit_code, testing::kExitUsage) << testing::describe(mixed);
  EXPECT_NE(mixed.err.find("one chip"), std::string::npos) << mixed.err;
  fs::remove_all(tmp);
}

TEST(AlgtestImport, CliWritesAProfileThatEmulates) {
  fs::path out = fs::temp_directory_path() / ("tpmsec-algtest-" + std::to_string(::getpid()) + ".json");
  std::vector<std::string> args = {"profile", "from-algtest"};
  for (const std::string& d : runs_in(kSlbDir)) args.push_back(d);
  args.insert(args.end(), {"--name", "Test SLB9670", "-o", out.string()});
  auto r = run_tpmsec(args);
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  auto p = load_profile(out.string());
  ASSERT_TRUE(p.ok()) << p.error().message();
  EXPECT_EQ(p->name, "Test SLB9670");
  EXPECT_EQ(p->id, out.stem().string());
  auto show = run_tpmsec({"profiles", "show", out.string()});
  EXPECT_EQ(show.exit_code, 0) << testing::describe(show);
  EXPECT_NE(show.out.find("context gap"), std::string::npos) << show.out;
  auto help = run_tpmsec({"profile", "from-algtest", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("tpm2-algtest"), std::string::npos);
  fs::remove(out);
}

TEST(AlgtestImport, KeepPrefersMeasuredValuesOfTheEarlierProfile) {
  auto seed = load_profile("slb9670");
  ASSERT_TRUE(seed.ok()) << seed.error().message();
  AlgtestImport imp = import(runs_in(kSlbDir), *seed);
  const LatencyProfile& p = imp.profile;
  // The seed thread's M values (S1) beat the rules.
  for (const char* v : {"PCR_Extend", "FlushContext", "ContextLoad.object", "StartAuthSession.ecc"}) {
    EXPECT_EQ(p.commands.at(v), seed->commands.at(v)) << v;
    EXPECT_EQ(p.commands.at(v).tag, kTagMeasured) << v;
  }
  EXPECT_DOUBLE_EQ(p.hmac_session.ms, 18.0);  // D from two S1 M values, over rule A6
  // Rule-derived values are imported again, not kept; E rules follow the kept FlushContext.
  EXPECT_NE(p.commands.at("PCR_Read").note.find("rule A3"), std::string::npos);
  EXPECT_DOUBLE_EQ(p.commands.at("ContextSave.session").ms, 4 * 3.20);
  EXPECT_DOUBLE_EQ(p.commands.at("ContextLoad.session").ms, 36.98);
  EXPECT_EQ(p.identity.bus, seed->identity.bus);
  EXPECT_EQ(p.seed, seed->seed);
  // The ContextLoad/ContextSave stall events stay; the RSA tail is the measured one.
  size_t stalls = 0, rsa = 0;
  for (const TailEvent& t : p.tail_events) {
    stalls += t.variant.rfind("Context", 0) == 0;
    rsa += t.variant == "CreatePrimary.rsa";
  }
  EXPECT_EQ(stalls, 2u);
  EXPECT_EQ(rsa, 1u);  // from the 1000 key generations of the run that kept its CSV, not the seed's guess
  for (const TailEvent& t : p.tail_events) {
    if (t.variant == "CreatePrimary.rsa") EXPECT_EQ(t.tag, kTagDerived);
  }
  // Importing the same runs again over the result changes nothing (regeneration is stable).
  AlgtestImport again = import(runs_in(kSlbDir), p);
  EXPECT_EQ(again.profile, p);
}

TEST(AlgtestImport, ExtendedFieldsAreValidated) {
  auto base = to_json(import({kSlbRun}).profile);
  auto bad = base;
  bad["commands"]["FlushContext"].erase("high_ms");
  auto r = profile_from_json(bad, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("low_ms and high_ms go together"), std::string::npos) << r.error().message();
  bad = base;
  bad["commands"]["FlushContext"]["low_ms"] = 100.0;
  r = profile_from_json(bad, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("does not contain"), std::string::npos) << r.error().message();
  bad = base;
  bad["commands"]["GetRandom"]["distribution"]["p5_ms"] = 1000.0;
  r = profile_from_json(bad, "x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("p5_ms <= median_ms"), std::string::npos) << r.error().message();
  bad = base;
  bad["slots"]["context_gap_max"] = -1;
  EXPECT_FALSE(profile_from_json(bad, "x").ok());
  bad = base;
  bad["commands"]["GetRandom"]["distribution"]["typo"] = 1;
  EXPECT_FALSE(profile_from_json(bad, "x").ok());
}

// The rules A1-A6, applied to the SLB9670's TPMScan operations alone, against
// what the seed thread measured on that chip (the M values of the shipped
// profile): each derived value is within the rule's stated error, and the
// stated error is not loose by more than 10 points (so the docs stay honest).
TEST(AlgtestImport, RulesErrorAgainstTheSeedsMeasuredSlb9670) {
  auto seed = load_profile("slb9670");
  ASSERT_TRUE(seed.ok()) << seed.error().message();
  AlgtestImport imp = import(runs_in(kSlbDir));
  auto measured = [&](const std::string& variant) -> const LatencyValue& {
    return variant == "hmac_session" ? seed->hmac_session : seed->commands.at(variant);
  };
  auto derived = [&](const std::string& variant) -> const LatencyValue& {
    return variant == "hmac_session" ? imp.profile.hmac_session : imp.profile.commands.at(variant);
  };
  for (const RuleError& rule : kRuleErrors) {
    std::string variant = rule.variant;
    SCOPED_TRACE(variant);
    const LatencyValue& m = measured(variant);
    // The seed's values (S1) are M, or D from two M values (hmac_session).
    EXPECT_TRUE(m.tag == kTagMeasured || m.tag == kTagDerived);
    double error = (derived(variant).ms - m.ms) / m.ms;
    EXPECT_LE(std::fabs(error), rule.error) << rule.rule << " error " << error;
    EXPECT_GE(std::fabs(error), rule.error - 0.10) << rule.rule << " error " << error << " (stated bound too loose)";
  }
}

}  // namespace
}  // namespace tpmsec
