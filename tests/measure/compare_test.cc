// tpmsec trace import and tpmsec compare as a user meets them: real
// `bench --emulate` results and a seed-thread import side by side, as text,
// markdown and SVG; bad inputs refused with exit code 2 and nothing written;
// an import turned into a profile and emulated.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "support/test_data.h"
#include "tpmsec/measure/compare.h"

namespace tpmsec {
namespace {

using testing::slurp;

using testing::run_tpmsec;
namespace fs = std::filesystem;

std::string seed(const std::string& name) { return std::string(TPMSEC_TEST_DATA) + "/ftrace/" + name; }

class CompareTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/tpmsec-compare-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* profile : {"slb9670", "st33ktpm2x"}) {
      auto r = run_tpmsec(
          {"bench", "--emulate", profile, "--iterations", "5", "--json", path(std::string(profile) + ".json")});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    auto r = run_tpmsec({"trace", "import", seed("slb9670-nohmac.txt"), seed("slb9670-hmac.txt"), "--label",
                         "IFX SLB9670 (seed thread)", "--manufacturer", "IFX", "--json", path("import.json")});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    import_out_ = r.out;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return dir_ + "/" + name; }
  static std::vector<std::string> results() {
    return {path("slb9670.json"), path("st33ktpm2x.json"), path("import.json")};
  }

  static std::string dir_;
  static std::string import_out_;
};
std::string CompareTest::dir_;
std::string CompareTest::import_out_;

TEST_F(CompareTest, TraceImportPrintsTheBenchReport) {
  EXPECT_NE(import_out_.find("clock      ftrace"), std::string::npos) << import_out_;
  EXPECT_NE(import_out_.find("tpm2_start_auth_session() {"), std::string::npos) << import_out_;
  EXPECT_NE(import_out_.find("151171.000 us |  }"), std::string::npos) << import_out_;
  EXPECT_NE(import_out_.find("6415.012 us |  }"), std::string::npos) << import_out_;
  EXPECT_NE(import_out_.find("recommendation: per-command"), std::string::npos) << import_out_;
}

TEST_F(CompareTest, TextTableHasAColumnPerResult) {
  std::vector<std::string> args{"compare"};
  for (const auto& r : results()) args.push_back(r);
  auto r = run_tpmsec(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& out = r.out;
  for (const char* needle : {"IFX SLB9670 fw 7.85", "emulated: slb9670", "emulated: st33ktpm2x", "ftrace import",
                             "IFX SLB9670 (seed thread)", "command: TPM ms, median / p99", "per-command", "plain",
                             "PCR_Extend (password)"}) {
    EXPECT_NE(out.find(needle), std::string::npos) << needle << "\n" << out;
  }
  // The import's own figures, as the seed thread gives them.
  EXPECT_NE(out.find("151.2 / 151.2 (23.6x)"), std::string::npos) << out;
  EXPECT_NE(out.find("84.75 / 84.75"), std::string::npos) << out;
  // Every value row has a cell per result, "-" where a result lacks the row.
  EXPECT_NE(out.find("GetRandom(32)"), std::string::npos) << out;
  // The columns line up: each table line starts its second column at the same offset.
  std::istringstream lines(out);
  std::string line;
  std::getline(lines, line);
  size_t column = line.find("IFX SLB9670 fw 7.85");
  ASSERT_NE(column, std::string::npos);
  std::getline(lines, line);
  EXPECT_EQ(line.find("emulated: slb9670"), column) << line;
}

TEST_F(CompareTest, ValuesComeFromTheResults) {
  nlohmann::json bench = nlohmann::json::parse(slurp(path("slb9670.json")));
  auto col = compare_column(bench, "slb9670.json");
  ASSERT_TRUE(col.ok()) << col.error().message();
  EXPECT_EQ(col->tpm, "IFX SLB9670 fw 7.85");
  EXPECT_EQ(col->source, "emulated: slb9670");
  ASSERT_EQ(col->commands.size(), bench["primitives"].size());
  EXPECT_EQ(col->commands[0].first, bench["primitives"][0]["name"]);
  EXPECT_DOUBLE_EQ(col->commands[0].second.median, bench["primitives"][0]["tpm_ms"]["median"].get<double>());
  for (const auto& s : bench["strategies"]) {
    const auto& mine = col->strategies.at(s["name"].get<std::string>());
    EXPECT_DOUBLE_EQ(mine.per_extend_ms.median, s["per_extend_ms"]["median"].get<double>());
    EXPECT_DOUBLE_EQ(mine.per_extend_ms.p99, s["per_extend_ms"]["p99"].get<double>());
    EXPECT_DOUBLE_EQ(mine.ratio_to_plain, s["ratio_to_plain"].get<double>());
  }
  // The emulated SLB9670 costs what the seed thread measured, within the model's jitter.
  EXPECT_NEAR(col->strategies.at("per-command").per_extend_ms.median, 151.2, 10);
}

TEST_F(CompareTest, Markdown) {
  std::vector<std::string> args{"compare", "--markdown"};
  for (const auto& r : results()) args.push_back(r);
  auto r = run_tpmsec(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line.rfind("| | **IFX SLB9670 fw 7.85**<br>emulated: slb9670<br>`", 0), 0u) << line;
  std::getline(lines, line);
  EXPECT_EQ(line, "|---|---:|---:|---:|");
  size_t rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(line.front(), '|') << line;
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 5) << line;
  }
  EXPECT_GT(rows, 10u);
  EXPECT_NE(r.out.find("| **strategy: ms per extend, median / p99 (x plain)** |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| per-command |"), std::string::npos) << r.out;
}

// Tags open and close in order; every attribute value is quoted.
void expect_well_formed(const std::string& svg) {
  ASSERT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  std::vector<std::string> open;
  size_t i = 0;
  while ((i = svg.find('<', i)) != std::string::npos) {
    size_t end = svg.find('>', i);
    ASSERT_NE(end, std::string::npos) << "unterminated tag at " << i;
    std::string tag = svg.substr(i + 1, end - i - 1);
    ASSERT_EQ(std::count(tag.begin(), tag.end(), '"') % 2, 0) << tag;
    if (tag[0] == '/') {
      ASSERT_FALSE(open.empty()) << tag;
      EXPECT_EQ("/" + open.back(), tag);
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
    i = end + 1;
  }
  EXPECT_TRUE(open.empty()) << open.back();
  EXPECT_EQ(svg.find("&&"), std::string::npos);
}

TEST_F(CompareTest, SvgIsAWellFormedGroupedBarChart) {
  std::vector<std::string> args{"compare", "--svg", path("compare.svg")};
  for (const auto& r : results()) args.push_back(r);
  auto r = run_tpmsec(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string svg = slurp(path("compare.svg"));
  expect_well_formed(svg);
  EXPECT_FALSE(fs::exists(path("compare.svg.tmp")));
  // A bar per result in each strategy group the result has: five strategies
  // for each emulated run, two for the import.
  size_t bars = 0;
  for (size_t i = 0; (i = svg.find("<rect x=", i)) != std::string::npos; ++i) {
    if (svg.find("<title>", i) < svg.find("/>", i)) ++bars;
  }
  EXPECT_EQ(bars, 5u + 5u + 2u);
  EXPECT_NE(svg.find("per-command — IFX SLB9670 (seed thread) (ftrace import): median 151.171 ms"), std::string::npos);
}

TEST_F(CompareTest, BadInputsExitTwoAndWriteNothing) {
  std::ofstream(path("not-json.json")) << "{ nope";
  std::ofstream(path("other.json")) << R"({"schema": "tpmsec-info/1"})";
  std::ofstream(path("broken.json")) << R"({"schema": "tpmsec-bench/1", "tpm": {}, "primitives": [{"name": "x"}],
                                            "strategies": []})";
  struct Case {
    std::string file;
    std::string says;
  };
  for (const Case& c :
       {Case{path("missing.json"), "no such file"}, Case{path("not-json.json"), "not valid JSON"},
        Case{path("other.json"), "schema tpmsec-bench/1"}, Case{path("broken.json"), "primitives[0].tpm_ms is missing"},
        Case{dir_, "not a regular file"}}) {
    auto r = run_tpmsec({"compare", path("slb9670.json"), c.file, "--svg", path("never.svg")});
    EXPECT_EQ(r.exit_code, 2) << c.file;
    EXPECT_NE(r.err.find(c.file), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(fs::exists(path("never.svg")));
  }
}

TEST_F(CompareTest, TraceImportRefusesMalformedCaptures) {
  std::ofstream(path("bad.txt")) << "# tracer: function_graph\n 0)               |  tpm2_pcr_extend() {\nhello\n";
  auto r = run_tpmsec({"trace", "import", path("bad.txt"), "--json", path("bad.json")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path("bad.txt") + ":3:"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("bad.json")));
  auto missing = run_tpmsec({"trace", "import", path("nothing.txt")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nothing.txt: no such file"), std::string::npos) << missing.err;
}

// A result saved from an interrupted bench is partial: compare and
// profile from-bench say so on stderr (and still work with what it holds).
TEST_F(CompareTest, InterruptedInputIsNamed) {
  auto interrupted_copy = [](const std::string& from, const std::string& to) {
    std::string text = slurp(from);
    const std::string flag = "\"interrupted\": false";
    size_t at = text.find(flag);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, flag.size(), "\"interrupted\": true");
    std::ofstream(to) << text;
  };
  const std::string partial = path("partial.json"), partial_import = path("partial-import.json");
  interrupted_copy(path("slb9670.json"), partial);
  interrupted_copy(path("import.json"), partial_import);
  auto compared = run_tpmsec({"compare", partial, path("st33ktpm2x.json")});
  EXPECT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_NE(compared.err.find("warning: " + partial + " is an interrupted run"), std::string::npos) << compared.err;
  // (A profile comes from a real TPM's result: the imported kernel capture.)
  auto profile = run_tpmsec({"profile", "from-bench", partial_import, "-o", path("partial-profile.json")});
  EXPECT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_NE(profile.err.find("is an interrupted run"), std::string::npos) << profile.err;
  auto whole = run_tpmsec({"compare", path("slb9670.json"), path("st33ktpm2x.json")});
  EXPECT_EQ(whole.err.find("interrupted"), std::string::npos) << whole.err;
}

TEST_F(CompareTest, ImportBecomesAProfileThatEmulates) {
  auto made = run_tpmsec({"profile", "from-bench", path("import.json"), "-o", path("seed.json")});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  nlohmann::json profile = nlohmann::json::parse(slurp(path("seed.json")));
  EXPECT_DOUBLE_EQ(profile["commands"]["ContextLoad.object"]["ms"].get<double>(), 36.97699);
  EXPECT_EQ(profile["name"], "IFX SLB9670 (seed thread) (ftrace import)");
  auto bench = run_tpmsec({"bench", "--emulate", path("seed.json"), "--iterations", "3", "--no-primitives",
                           "--strategies", "per-command,plain", "--json", path("seed-bench.json")});
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  nlohmann::json j = nlohmann::json::parse(slurp(path("seed-bench.json")));
  for (const auto& s : j["strategies"]) {
    // PCR_Extend 6.36 ms; per-command: 36.98 + 84.75 + 3.20 + 24.36 = 149.3 ms of TPM time.
    // Compared on the TPM's share (the breakdown's commands): per_extend_ms
    // also holds the host's real work, which depends on the machine's load.
    double expected = s["name"] == "plain" ? 6.36 : 149.27;
    double tpm_ms = 0;
    for (const auto& c : s["breakdown"]) tpm_ms += c["ms"].get<double>();
    EXPECT_NEAR(tpm_ms, expected, expected * 0.1) << s["name"];
    EXPECT_GE(s["per_extend_ms"]["max"].get<double>(), tpm_ms * 0.999) << s["name"];
  }
}

}  // namespace
}  // namespace tpmsec
