// tpmsec bench on real TPMs: the emulated SLB9670 reproduces the seed's
// figures, the JSON matches its schema, a run cleans up after itself, and
// profiles made from bench results load.
#include <fstream>

#include "support/json_schema.h"
#include "support/test_tpm.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/measure/measured_tpm.h"
#include "tpmsec/measure/profile_from_bench.h"
#include "tpmsec/pcr.h"

namespace tpmsec {
namespace {

// An RFC 4180 reader (quoted fields, doubled quotes, CRLF): the rows, or none
// for malformed input.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, in_quotes = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        field += c;
      }
    } else if (c == '"' && field.empty() && !quoted) {
      in_quotes = quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      quoted = false;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      row.push_back(field);
      rows.push_back(row);
      row.clear();
      field.clear();
      quoted = false;
      ++i;
    } else if (c == '"' || c == '\n' || c == '\r') {
      return {};
    } else {
      field += c;
    }
  }
  if (in_quotes || !row.empty() || !field.empty()) return {};
  return rows;
}

nlohmann::json load_schema() {
  std::ifstream in(std::string(TPMSEC_DATA_DIR) + "/schema/bench.schema.json");
  return nlohmann::json::parse(in);
}

class BenchTest : public testing::TpmTest {
 protected:
  Result<BenchResult> bench(const std::string& emulate, BenchOptions options) {
    auto m = measure_tpm(transport(), emulate);
    if (!m.ok()) return m.error();
    measured_ = std::move(*m);
    auto r = run_bench(*measured_->tpm, measured_->log, *measured_->clock, measured_->info, options);
    if (r.ok()) r->tpm = measured_->identity;
    return r;
  }
  void expect_clean() {
    for (uint32_t first : {ht::kFirstHmacSession, ht::kFirstTransient}) {
      auto h = tpm().run(cmd::GetCapability{cap::kHandles, first, 64});
      ASSERT_TRUE(h.ok());
      EXPECT_TRUE(h->capability_data.handles.empty()) << std::hex << first;
    }
    EXPECT_EQ(*pcr_read(tpm(), alg::kSha256, 16), Bytes(32, 0)) << "the bench PCR must be reset";
  }
  const StrategyResult& strategy(const BenchResult& r, StrategyKind k) {
    for (const auto& s : r.strategies) {
      if (s.kind == k) return s;
    }
    ADD_FAILURE() << "no " << strategy_name(k);
    return r.strategies.front();
  }
  std::unique_ptr<MeasuredTpm> measured_;
};

void expect_within(double actual, double expected, double fraction, const std::string& what) {
  EXPECT_NEAR(actual, expected, expected * fraction) << what;
}

TEST_P(BenchTest, EmulatedSlb9670ReproducesTheSeedFigures) {
  BenchOptions options;
  options.iterations = 101;  // 100 steady-state extends: one checkpoint in steady state
  options.checkpoint_every = 100;
  options.primitives = false;
  auto r = bench("slb9670", options);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->virtual_clock);
  EXPECT_EQ(r->tpm["manufacturer"], "IFX");
  EXPECT_EQ(r->tpm["emulated"], true);

  const auto& per_command = strategy(*r, StrategyKind::kPerCommand);
  expect_within(per_command.per_extend_ms.median, 151.2, 0.05, "per-command");
  EXPECT_DOUBLE_EQ(per_command.tpm_commands_per_extend, 4.0);
  // The 37 / 85 / 3 / 24 ms lines of the seed's trace.
  std::string graph = function_graph(per_command);
  for (const char* line : {"ContextLoad (object)", "StartAuthSession (ECC salt)", "FlushContext (object)",
                           "PCR_Extend (HMAC session)", "tpm2_start_auth_session()"}) {
    EXPECT_NE(graph.find(line), std::string::npos) << line << "\n" << graph;
  }
  std::map<std::string, double> ms;
  size_t rep = 0;
  for (size_t i = 1; i < per_command.extends.size(); ++i) {
    if (std::abs(per_command.extends[i].total_ms - per_command.per_extend_ms.median) <
        std::abs(per_command.extends[rep].total_ms - per_command.per_extend_ms.median))
      rep = i;
  }
  for (const auto& c : per_command.extends[rep].commands) ms[command_label(c.shape)] = c.duration_ns / 1e6;
  expect_within(ms["ContextLoad (object)"], 36.98, 0.08, "ContextLoad");
  expect_within(ms["StartAuthSession (ECC salt)"], 84.75, 0.08, "StartAuthSession");
  expect_within(ms["FlushContext (object)"], 3.20, 0.08, "FlushContext");
  expect_within(ms["PCR_Extend (HMAC session)"], 24.36, 0.08, "HMAC'd extend");

  const auto& plain = strategy(*r, StrategyKind::kPlain);
  expect_within(plain.per_extend_ms.median, 6.4, 0.05, "plain");
  EXPECT_DOUBLE_EQ(plain.tpm_commands_per_extend, 1.0);

  const auto& resident = strategy(*r, StrategyKind::kResident);
  expect_within(resident.per_extend_ms.median, 24.4, 0.05, "resident");
  EXPECT_DOUBLE_EQ(resident.tpm_commands_per_extend, 1.0);

  auto profile = load_profile("slb9670");
  ASSERT_TRUE(profile.ok());
  LatencyModel model(*profile);
  double saved_expected = model.value_for("ContextLoad.session").ms + model.value_for("PCR_Extend").ms +
                          profile->hmac_session.ms + model.value_for("ContextSave.session").ms;
  const auto& saved = strategy(*r, StrategyKind::kSavedContext);
  expect_within(saved.per_extend_ms.median, saved_expected, 0.05, "saved-context");
  EXPECT_DOUBLE_EQ(saved.tpm_commands_per_extend, 3.0);

  const auto& checkpoint = strategy(*r, StrategyKind::kCheckpoint);
  expect_within(checkpoint.per_extend_ms.mean, plain.per_extend_ms.mean, 0.10, "checkpoint vs plain");
  EXPECT_NEAR(checkpoint.tpm_commands_per_extend, 1.01, 1e-9);
  EXPECT_NE(r->recommendation.find("recommendation: resident"), std::string::npos) << r->recommendation;
  expect_clean();
}

TEST_P(BenchTest, JsonMatchesItsSchemaAndTheRunCleansUp) {
  BenchOptions options;
  options.iterations = 5;
  auto r = bench("", options);
  ASSERT_TRUE(r.ok()) << r.error().message();
  nlohmann::json j = bench_json(*r);
  auto schema = load_schema();
  auto errors = testing::validate_json(schema, j);
  EXPECT_TRUE(errors.empty()) << errors.front();
  EXPECT_EQ(j["strategies"].size(), 5u);
  EXPECT_EQ(j["primitives"].size(), 14u);
  // The validator can fail.
  j["strategies"][0].erase("per_extend_ms");
  j["clock"] = "sundial";
  EXPECT_EQ(testing::validate_json(schema, j).size(), 2u);
  // CSV: one row per sample; trace: events for every command.
  std::string csv = bench_csv(*r);
  std::vector<std::vector<std::string>> rows = parse_csv(csv);
  ASSERT_EQ(rows.size(), 1u + 14 * 5 + 5 * 5);
  bool quoted_comma = false;
  for (const auto& row : rows) {
    EXPECT_EQ(row.size(), 7u) << (row.empty() ? "" : row[1]);
    if (row.size() > 1 && row[1].find(',') != std::string::npos) quoted_comma = true;
  }
  EXPECT_TRUE(quoted_comma) << "a command name with a comma, e.g. CreatePrimary (null key, ECC)";
  auto trace = bench_trace(*r);
  EXPECT_GT(trace["traceEvents"].size(), 100u);
  EXPECT_NE(bench_svg(*r).find("<svg"), std::string::npos);
  expect_clean();
}

TEST(BenchCsv, TheReaderCanFail) {
  EXPECT_EQ(parse_csv("a,\"b,c\",d\r\n").front().size(), 3u);
  EXPECT_EQ(parse_csv("a,b,c,d\r\n").front().size(), 4u);
  EXPECT_TRUE(parse_csv("a,\"b\r\n").empty());  // an unterminated quote
}

TEST_P(BenchTest, StoppedRunStillCleansUp) {
  std::atomic<bool> stop{false};
  BenchOptions options;
  options.iterations = 50;
  options.stop = &stop;
  options.progress = [&stop](size_t done, size_t, const std::string&) {
    if (done >= 3) stop = true;
  };
  auto r = bench("", options);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_TRUE(r->interrupted);
  // The report says so, and shows no figures for what was not measured.
  std::string text = bench_text(*r);
  EXPECT_NE(text.find(", INTERRUPTED"), std::string::npos) << text;
  EXPECT_NE(text.find("not measured ("), std::string::npos) << text;
  EXPECT_EQ(text.find("     0          0"), std::string::npos) << "0 cells: " << text;
  EXPECT_EQ(text.find("0.0x plain"), std::string::npos) << text;
  // Nothing is recommended from partial data, and the report says why.
  EXPECT_NE(r->recommendation.find("none, the run was interrupted"), std::string::npos) << r->recommendation;
  EXPECT_EQ(text.find("recommendation: per-command"), std::string::npos) << text;
  EXPECT_EQ(text.find("recommendation: resident"), std::string::npos) << text;
  EXPECT_TRUE(bench_json(*r)["interrupted"].get<bool>());
  expect_clean();
}

TEST_P(BenchTest, ProfileFromBenchLoadsAndRefusesEmulatedResults) {
  BenchOptions options;
  options.iterations = 5;
  options.strategies = {StrategyKind::kResident};
  auto r = bench("", options);
  ASSERT_TRUE(r.ok());
  auto profile = profile_from_bench(bench_json(*r), "mine", "test");
  ASSERT_TRUE(profile.ok()) << profile.error().message();
  EXPECT_EQ(profile->identity.manufacturer, "IBM");
  ASSERT_TRUE(profile->commands.count("PCR_Extend"));
  EXPECT_GT(profile->commands.at("PCR_Extend").ms, 0.0);
  EXPECT_EQ(profile->commands.at("PCR_Extend").tag, 'M');

  auto emulated = bench("slb9670", options);
  ASSERT_TRUE(emulated.ok());
  auto refused = profile_from_bench(bench_json(*emulated), "copy", "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("emulated"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Embedded, BenchTest, ::testing::Values(testing::TpmKind::kEmbedded),
                         testing::tpm_kind_param_name);

}  // namespace
}  // namespace tpmsec
