// Ranges, not false precision (docs/latency-profiles.md, "Uncertainty"):
// every profile value has a range, a strategy's cost range is the sum of its
// commands' ends, a decision says when it rests on estimates or sits within
// the uncertainty, and the JSON outputs carry low/high.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/json_schema.h"
#include "support/log_builder.h"
#include "support/run_command.h"
#include "tpmsec/calibration/calibration.h"
#include "tpmsec/emulation/algtest_import.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/value_range.h"

namespace tpmsec {
namespace {

using testing::run_tpmsec;

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/ranges-" + name; }

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

const LatencyValue& value(const LatencyProfile& p, const std::string& variant) {
  auto it = p.commands.find(variant);
  return it != p.commands.end() ? it->second : p.commands.at("default");
}

// A strategy's commands per extend (docs/strategies.md), with the weight of
// each: the checkpoint's audited read is amortized over 100 extends.
std::vector<std::pair<std::string, double>> terms(StrategyKind k) {
  switch (k) {
    case StrategyKind::kPlain:
      return {{"PCR_Extend", 1}};
    case StrategyKind::kResident:
      return {{"PCR_Extend", 1}, {"hmac", 1}};
    case StrategyKind::kPerCommand:
      return {
          {"ContextLoad.object", 1}, {"StartAuthSession.ecc", 1}, {"FlushContext", 1}, {"PCR_Extend", 1}, {"hmac", 1}};
    case StrategyKind::kSavedContext:
      return {{"ContextLoad.session", 1}, {"PCR_Extend", 1}, {"hmac", 1}, {"ContextSave.session", 1}};
    case StrategyKind::kCheckpoint:
      return {{"PCR_Extend", 1}, {"PCR_Read", 0.01}, {"hmac", 0.01}};
  }
  return {};
}

TEST(CalibrationRanges, EveryTagHasItsDefaultFromOnePlace) {
  LatencyValue v;
  v.ms = 10;
  v.jitter_ms = 1;
  v.tag = kTagEstimate;
  EXPECT_DOUBLE_EQ(value_range(v).low_ms, 5);
  EXPECT_DOUBLE_EQ(value_range(v).high_ms, 20);
  EXPECT_FALSE(value_range(v).stated);
  v.tag = kTagDerived;  // the largest validated rule error, A5's 40 %
  EXPECT_DOUBLE_EQ(default_relative_error(kTagDerived), 0.40);
  EXPECT_DOUBLE_EQ(value_range(v).low_ms, 10 / 1.4);
  EXPECT_DOUBLE_EQ(value_range(v).high_ms, 10 / 0.6);
  v.tag = kTagMeasured;  // p5-p95 of the jitter
  EXPECT_DOUBLE_EQ(value_range(v).low_ms, 10 - 1.645);
  EXPECT_DOUBLE_EQ(value_range(v).high_ms, 10 + 1.645);
  v.low_ms = 9.5;
  v.high_ms = 11;
  EXPECT_TRUE(value_range(v).stated);
  EXPECT_DOUBLE_EQ(value_range(v).low_ms, 9.5);
  EXPECT_DOUBLE_EQ(value_range(v).high_ms, 11);
}

TEST(CalibrationRanges, StrategyRangeIsTheSumOfItsCommandsEnds) {
  auto profiles = load_all_profiles();
  ASSERT_TRUE(profiles.ok()) << profiles.error().message();
  ASSERT_GE(profiles->size(), 10u);
  for (const LatencyProfile& p : *profiles) {
    StrategyCosts costs = costs_from_profile(p);
    for (StrategyKind k : all_strategies()) {
      double ms = 0, low = 0, high = 0, estimated = 0;
      for (const auto& [variant, weight] : terms(k)) {
        const LatencyValue& v = variant == "hmac" ? p.hmac_session : value(p, variant);
        ValueRange r = value_range(v);
        EXPECT_LE(r.low_ms, v.ms) << p.id << " " << variant;
        EXPECT_GE(r.high_ms, v.ms) << p.id << " " << variant;
        ms += weight * v.ms;
        low += weight * r.low_ms;
        high += weight * r.high_ms;
        if (v.tag == kTagEstimate) estimated += weight * v.ms;
      }
      const CostRange* range = cost_range(costs, k);
      ASSERT_NE(range, nullptr) << p.id << " " << strategy_name(k);
      EXPECT_NEAR(costs.per_extend_ms.at(k), ms, 1e-9) << p.id << " " << strategy_name(k);
      EXPECT_NEAR(range->low_ms, low, 1e-9) << p.id << " " << strategy_name(k);
      EXPECT_NEAR(range->high_ms, high, 1e-9) << p.id << " " << strategy_name(k);
      EXPECT_NEAR(range->estimated_ms, estimated, 1e-9) << p.id << " " << strategy_name(k);
      EXPECT_LT(range->low_ms, range->high_ms) << p.id << " " << strategy_name(k);
    }
  }
}

// The rules' validation (docs/latency-profiles.md): the SLB9670 derived from
// its TPMScan runs alone. Each rule-derived value's stated range, and each
// per-extend cost range built from them, must contain what the seed thread
// measured on that chip.
TEST(CalibrationRanges, DerivedSlb9670RangesContainTheSeedsMeasuredCosts) {
  std::vector<std::string> args = {"profile", "from-algtest"};
  for (const auto& run :
       std::filesystem::directory_iterator(std::string(TPMSEC_TEST_DATA) + "/tpmscan/IFX/7.85.17.51968")) {
    args.push_back(run.path().string());
  }
  std::sort(args.begin() + 2, args.end());
  ASSERT_EQ(args.size(), 8u);  // six runs
  std::string out = temp_path("slb9670-derived.json");
  args.insert(args.end(), {"-o", out});
  auto r = run_tpmsec(args);
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  auto derived = load_profile(out);
  auto seed = load_profile("slb9670");
  ASSERT_TRUE(derived.ok() && seed.ok());
  for (const RuleError& rule : kRuleErrors) {
    std::string v = rule.variant;
    const LatencyValue& d = v == "hmac_session" ? derived->hmac_session : derived->commands.at(v);
    const LatencyValue& m = v == "hmac_session" ? seed->hmac_session : seed->commands.at(v);
    ValueRange range = value_range(d);
    EXPECT_TRUE(range.stated) << rule.rule;
    EXPECT_LE(range.low_ms, m.ms) << rule.rule << " " << v;
    EXPECT_GE(range.high_ms, m.ms) << rule.rule << " " << v;
  }
  StrategyCosts from_rules = costs_from_profile(*derived), measured = costs_from_profile(*seed);
  for (StrategyKind k : {StrategyKind::kPlain, StrategyKind::kResident, StrategyKind::kPerCommand}) {
    EXPECT_LE(cost_range(from_rules, k)->low_ms, measured.per_extend_ms.at(k)) << strategy_name(k);
    EXPECT_GE(cost_range(from_rules, k)->high_ms, measured.per_extend_ms.at(k)) << strategy_name(k);
  }
}

// slb9670 with every value measured, stated as +/- 1 %.
LatencyProfile all_measured() {
  auto p = load_profile("slb9670");
  EXPECT_TRUE(p.ok());
  LatencyProfile m = *p;
  m.id = "all-measured";
  auto measured = [](LatencyValue& v) {
    v.tag = kTagMeasured;
    v.low_ms = v.ms * 0.99;
    v.high_ms = v.ms * 1.01;
  };
  for (auto& [variant, v] : m.commands) measured(v);
  measured(m.hmac_session);
  measured(m.param_encryption_per_byte);
  for (TailEvent& t : m.tail_events) t.tag = kTagMeasured;
  return m;
}

bool has_line(const std::vector<std::string>& notes, std::string_view start) {
  for (const std::string& n : notes) {
    if (n.rfind(start, 0) == 0) return true;
  }
  return false;
}

TEST(CalibrationRanges, OnlyEstimatesMakeADecisionRestOnEstimates) {
  LatencyProfile m = all_measured();
  StrategyCosts costs = costs_from_profile(m);
  Calibration c = choose_strategy(costs, kDefaultBudgetMs);
  for (StrategyKind k : all_strategies()) EXPECT_EQ(estimated_share(costs, k), 0.0) << strategy_name(k);
  auto notes = uncertainty_notes(c.extend, costs, kDefaultBudgetMs);
  EXPECT_FALSE(has_line(notes, "decision rests on estimated values")) << fmt::format("{}", fmt::join(notes, "\n"));
  EXPECT_EQ(cost_text(costs, c.extend).find(" E)"), std::string::npos) << cost_text(costs, c.extend);

  // One estimated value in the chosen strategy's sum is enough.
  m.hmac_session.tag = kTagEstimate;
  StrategyCosts one_e = costs_from_profile(m);
  EXPECT_GT(estimated_share(one_e, c.extend), 0.0);
  EXPECT_TRUE(has_line(uncertainty_notes(c.extend, one_e, kDefaultBudgetMs), "decision rests on estimated values"));

  // A profile of estimates says so, for the decision the shipped policy makes from it.
  auto slb9672 = load_profile("slb9672");
  ASSERT_TRUE(slb9672.ok());
  StrategyCosts e = costs_from_profile(*slb9672);
  Calibration ce = choose_strategy(e, kDefaultBudgetMs);
  EXPECT_GT(estimated_share(e, ce.extend), 0.5);
  auto e_notes = uncertainty_notes(ce.extend, e, kDefaultBudgetMs);
  EXPECT_TRUE(has_line(e_notes, "decision rests on estimated values (E): "))
      << fmt::format("{}", fmt::join(e_notes, "\n"));
  EXPECT_NE(cost_text(e, ce.extend).find("% E)"), std::string::npos) << cost_text(e, ce.extend);
  // The ranges are shown, the decision is unchanged (it stays on the central figures).
  StrategyCosts central = e;
  central.range_ms.clear();
  EXPECT_EQ(choose_strategy(central, kDefaultBudgetMs).extend, ce.extend);
  EXPECT_TRUE(uncertainty_notes(ce.extend, central, kDefaultBudgetMs).empty());
}

TEST(CalibrationRanges, AnEstimatedRunnerUpClearOfTheChoiceIsNamedAsSuch) {
  // slb9670: resident's values are M and D; saved-context's rest on E
  // values (a session's ContextLoad/ContextSave), but its range stays above resident's.
  auto p = load_profile("slb9670");
  ASSERT_TRUE(p.ok());
  StrategyCosts costs = costs_from_profile(*p);
  ASSERT_EQ(estimated_share(costs, StrategyKind::kResident), 0.0);
  ASSERT_GT(estimated_share(costs, StrategyKind::kSavedContext), 0.0);
  ASSERT_GT(cost_range(costs, StrategyKind::kSavedContext)->low_ms,
            cost_range(costs, StrategyKind::kResident)->high_ms);
  auto notes = uncertainty_notes(StrategyKind::kResident, costs);
  EXPECT_TRUE(has_line(notes, "the runner-up rests on estimated values (E): "))
      << fmt::format("{}", fmt::join(notes, "\n"));
  EXPECT_FALSE(has_line(notes, "decision rests on estimated values")) << fmt::format("{}", fmt::join(notes, "\n"));
}

TEST(CalibrationRanges, OverlapAndBudgetAreNamed) {
  StrategyCosts costs;
  costs.per_extend_ms = {{StrategyKind::kResident, 10},
                         {StrategyKind::kSavedContext, 12},
                         {StrategyKind::kPerCommand, 40},
                         {StrategyKind::kPlain, 3}};
  costs.range_ms = {{StrategyKind::kResident, {8, 13, 0}},
                    {StrategyKind::kSavedContext, {11, 14, 0}},
                    {StrategyKind::kPerCommand, {35, 45, 0}},
                    {StrategyKind::kPlain, {2.5, 3.5, 0}}};
  auto notes = uncertainty_notes(StrategyKind::kResident, costs, 12);
  ASSERT_EQ(notes.size(), 2u) << fmt::format("{}", fmt::join(notes, "\n"));
  EXPECT_EQ(notes[0],
            "within the uncertainty of saved-context: resident 8.00-13.00 ms and saved-context "
            "11.00-14.00 ms overlap; the central figures decide");
  EXPECT_EQ(notes[1], "within the uncertainty of the 12.0 ms budget (it may fit or not): resident 8.00-13.00 ms");
  // Apart, and the budget outside the range: nothing to say.
  costs.range_ms[StrategyKind::kSavedContext] = {11.5, 14, 0};
  costs.range_ms[StrategyKind::kResident] = {9, 11, 0};
  EXPECT_TRUE(uncertainty_notes(StrategyKind::kResident, costs, 20).empty());
  // Checkpoint chosen over budget-breaking prevention whose range reaches the budget.
  costs.per_extend_ms[StrategyKind::kCheckpoint] = 3.1;
  costs.range_ms[StrategyKind::kCheckpoint] = {2.6, 3.6, 0};
  auto detection = uncertainty_notes(StrategyKind::kCheckpoint, costs, 9.5, ProtectionFloor::kDetection);
  EXPECT_TRUE(has_line(detection,
                       "within the uncertainty of the 9.5 ms budget (it may fit or not): resident 9.00-11.00 ms (more "
                       "protective, over budget at 10.00)"))
      << fmt::format("{}", fmt::join(detection, "\n"));
}

TEST(PolicyRanges, ShowSaysWhenTheDecisionRestsOnEstimates) {
  auto e = run_tpmsec({"policy", "show", "--emulate", "slb9672"});
  ASSERT_EQ(e.exit_code, 0) << testing::describe(e);
  EXPECT_NE(e.out.find("figures     profile slb9672 per extend"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("caution     decision rests on estimated values (E): "), std::string::npos) << e.out;

  std::string path = temp_path("all-measured.json");
  write_text(path, to_json(all_measured()).dump(2));
  auto m = run_tpmsec({"policy", "show", "--emulate", path});
  ASSERT_EQ(m.exit_code, 0) << testing::describe(m);
  EXPECT_NE(m.out.find("figures     profile all-measured per extend"), std::string::npos) << m.out;
  EXPECT_EQ(m.out.find("estimated values"), std::string::npos) << m.out;
}

TEST(ProfilesRanges, ListJsonCarriesTheSameRangesAsTheCosts) {
  auto r = run_tpmsec({"profiles", "--json"});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  nlohmann::json all = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(all.is_array()) << r.out;
  ASSERT_FALSE(all.empty());
  for (const auto& j : all) {
    auto profile = load_profile(j["id"].get<std::string>());
    ASSERT_TRUE(profile.ok());
    StrategyCosts costs = costs_from_profile(*profile);
    const std::pair<const char*, StrategyKind> keys[] = {{"plain", StrategyKind::kPlain},
                                                         {"hmac", StrategyKind::kResident},
                                                         {"per_command", StrategyKind::kPerCommand},
                                                         {"saved_context", StrategyKind::kSavedContext}};
    for (const auto& [key, kind] : keys) {
      const nlohmann::json& range = j["extend_ms_range"][key];
      EXPECT_NEAR(range[0].get<double>(), cost_range(costs, kind)->low_ms, 1e-3) << j["id"] << key;
      EXPECT_NEAR(range[1].get<double>(), cost_range(costs, kind)->high_ms, 1e-3) << j["id"] << key;
    }
  }
  auto show = run_tpmsec({"profiles", "show", "slb9672"});
  ASSERT_EQ(show.exit_code, 0) << testing::describe(show);
  EXPECT_NE(show.out.find("ranges: plain "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("(default for E: /2 to x2)"), std::string::npos) << show.out;
}

TEST(BenchRanges, EmulatedJsonCarriesTheModelRangeAndValidates) {
  std::string json = temp_path("bench.json");
  auto r = run_tpmsec({"bench", "--emulate", "slb9670", "--iterations", "3", "--no-primitives", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  nlohmann::json j = read_json(json);
  std::ifstream in(std::string(TPMSEC_DATA_DIR) + "/schema/bench.schema.json");
  nlohmann::json schema = nlohmann::json::parse(in);
  auto errors = testing::validate_json(schema, j);
  EXPECT_TRUE(errors.empty()) << fmt::format("{}", fmt::join(errors, "\n"));
  auto profile = load_profile("slb9670");
  ASSERT_TRUE(profile.ok());
  StrategyCosts costs = costs_from_profile(*profile);
  ASSERT_EQ(j["strategies"].size(), 5u);
  for (const auto& s : j["strategies"]) {
    ASSERT_TRUE(s.contains("model_ms")) << s.dump();
    StrategyKind k = *parse_strategy(s["name"].get<std::string>());
    const nlohmann::json& m = s["model_ms"];
    EXPECT_NEAR(m["ms"].get<double>(), costs.per_extend_ms.at(k), 1e-3);
    EXPECT_NEAR(m["low_ms"].get<double>(), cost_range(costs, k)->low_ms, 1e-3);
    EXPECT_NEAR(m["high_ms"].get<double>(), cost_range(costs, k)->high_ms, 1e-3);
    EXPECT_NEAR(m["estimated_share"].get<double>(), estimated_share(costs, k), 0.006);
  }
  EXPECT_NE(r.out.find("modelled"), std::string::npos) << r.out;
  // The schema requires each field of model_ms: one missing is an error.
  j["strategies"][0]["model_ms"].erase("high_ms");
  EXPECT_EQ(testing::validate_json(schema, j).size(), 1u);

  // A real (here the embedded) TPM has no model: nothing extra.
  auto real = run_tpmsec({"bench", "--iterations", "3", "--no-primitives", "--strategies", "plain", "--json", json});
  ASSERT_EQ(real.exit_code, 0) << testing::describe(real);
  EXPECT_FALSE(read_json(json)["strategies"][0].contains("model_ms"));
  EXPECT_EQ(real.out.find("modelled"), std::string::npos) << real.out;
}

TEST(PredictRanges, JsonCarriesLowHighAndTheEstimatedShare) {
  std::vector<testing::ImaRecord> records;
  for (int i = 0; i < 40; ++i) records.push_back(testing::sample_ima_record("ima-ng", i));
  std::string log = temp_path("ima.txt");
  write_text(log, testing::ima_ascii_log(records));
  std::string measured = temp_path("predict-all-measured.json");
  write_text(measured, to_json(all_measured()).dump(2));
  std::string json = temp_path("predict.json");
  auto r = run_tpmsec({"predict", "--ima", log, "--profiles", "slb9672," + measured, "--strategies",
                       "resident,per-command", "--json", json});
  ASSERT_EQ(r.exit_code, 0) << testing::describe(r);
  nlohmann::json p = read_json(json);
  ASSERT_EQ(p["profiles"].size(), 2u);
  for (const auto& prof : p["profiles"]) {
    for (const char* s : {"resident", "per-command"}) {
      const nlohmann::json& c = prof["results"][s];
      EXPECT_LT(c["total_s_low"].get<double>(), c["total_s"].get<double>()) << prof["id"] << s;
      EXPECT_GT(c["total_s_high"].get<double>(), c["total_s"].get<double>()) << prof["id"] << s;
      EXPECT_LT(c["per_extend_ms_low"].get<double>(), c["per_extend_ms"]["median"].get<double>()) << prof["id"] << s;
      EXPECT_GT(c["per_extend_ms_high"].get<double>(), c["per_extend_ms"]["median"].get<double>()) << prof["id"] << s;
      if (prof["id"] == "slb9672") {
        EXPECT_GT(c["estimated_share"].get<double>(), 0.5) << s;
      } else {
        EXPECT_EQ(c["estimated_share"].get<double>(), 0.0) << s;
      }
    }
  }
  // All-measured at +/- 1 %: the priced range is the central figure +/- 1 %.
  const nlohmann::json& m = p["profiles"][1]["results"]["resident"];
  EXPECT_NEAR(m["total_s_low"].get<double>(), 0.99 * m["total_s"].get<double>(), 1e-3 * m["total_s"].get<double>());
  EXPECT_NEAR(m["total_s_high"].get<double>(), 1.01 * m["total_s"].get<double>(), 1e-3 * m["total_s"].get<double>());
  EXPECT_NE(r.out.find("%E"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Figures marked E rest partly on estimated values"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tpmsec
