// --openmetrics: the Prometheus text exposition format that node_exporter's
// textfile collector reads, checked by a strict parser of the format's rules
// (https://prometheus.io/docs/instrumenting/exposition_formats/) and, where
// promtool is installed, by `promtool check metrics` too.
#include <fcntl.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/log_builder.h"
#include "support/run_command.h"
#include "support/test_data.h"
#include "tpmsec/measure/openmetrics.h"

namespace tpmsec {
namespace {

using testing::slurp;

using testing::describe;
using testing::run_command;
using testing::run_tpmsec;
namespace fs = std::filesystem;

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

struct Exposition {
  std::map<std::string, std::string> types;  // family -> type
  std::vector<Series> series;
  const Series* find(const std::string& name, const std::map<std::string, std::string>& want) const {
    for (const Series& s : series) {
      if (s.name != name) continue;
      bool all = true;
      for (const auto& [k, v] : want) all &= s.labels.count(k) && s.labels.at(k) == v;
      if (all) return &s;
    }
    return nullptr;
  }
  size_t count(const std::string& name) const {
    size_t n = 0;
    for (const Series& s : series) n += s.name == name;
    return n;
  }
};

bool metric_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == ':')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':')) return false;
  }
  return true;
}

bool label_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  if (s.rfind("__", 0) == 0) return false;  // reserved
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

// Parses the text format strictly; every violation is a test failure naming
// the line. Our own rules on top: names start with tpmsec_, no blank lines,
// every family has HELP and TYPE before its first sample, a family's samples
// are contiguous, and no series appears twice.
void parse_into(const std::string& text, Exposition& out) {
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "the last line must end with a newline";
  std::set<std::string> helped, finished, seen_series;
  std::string current;  // family whose samples are being read
  std::istringstream in(text);
  std::string line;
  size_t no = 0;
  while (std::getline(in, line)) {
    ++no;
    SCOPED_TRACE(fmt::format("line {}: {}", no, line));
    ASSERT_FALSE(line.empty()) << "blank line";
    ASSERT_EQ(line.find('\r'), std::string::npos);
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name;
      words >> hash >> kind >> name;
      ASSERT_EQ(hash, "#");
      ASSERT_TRUE(kind == "HELP" || kind == "TYPE") << "unknown comment";
      ASSERT_TRUE(metric_name(name));
      ASSERT_EQ(name.rfind("tpmsec_", 0), 0u);
      ASSERT_FALSE(finished.count(name) || name == current) << "HELP/TYPE after the family's samples";
      if (kind == "HELP") {
        ASSERT_TRUE(helped.insert(name).second) << "second HELP";
        std::string rest;
        std::getline(words, rest);
        ASSERT_GT(rest.size(), 1u) << "empty HELP";
      } else {
        ASSERT_FALSE(out.types.count(name)) << "second TYPE";
        std::string type, extra;
        words >> type >> extra;
        ASSERT_TRUE(type == "counter" || type == "gauge" || type == "histogram" || type == "summary" ||
                    type == "untyped");
        ASSERT_TRUE(extra.empty());
        out.types[name] = type;
      }
      continue;
    }
    Series s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    ASSERT_TRUE(metric_name(s.name));
    // A gauge's samples carry its name; a summary's its name (one per
    // quantile) and NAME_sum and NAME_count.
    std::string fam = s.name;
    if (!out.types.count(fam)) {
      for (const char* suffix : {"_sum", "_count"}) {
        std::string stem = s.name.substr(0, s.name.size() - std::min(s.name.size(), std::strlen(suffix)));
        if (s.name == stem + suffix && out.types.count(stem) && out.types[stem] == "summary") fam = stem;
      }
    }
    ASSERT_TRUE(out.types.count(fam)) << "sample before its TYPE";
    // Every family tpmsec writes is a gauge or a summary.
    ASSERT_TRUE(out.types[fam] == "gauge" || out.types[fam] == "summary") << out.types[fam];
    ASSERT_TRUE(helped.count(fam)) << "no HELP";
    if (fam != current) {
      ASSERT_FALSE(finished.count(fam)) << "family's samples are not contiguous";
      if (!current.empty()) finished.insert(current);
      current = fam;
    }
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        ASSERT_LT(i, line.size());
        if (line[i] == '}') {
          ++i;
          break;
        }
        size_t eq = line.find('=', i);
        ASSERT_NE(eq, std::string::npos);
        std::string key = line.substr(i, eq - i);
        ASSERT_TRUE(label_name(key)) << key;
        ASSERT_FALSE(s.labels.count(key)) << "label twice: " << key;
        i = eq + 1;
        ASSERT_LT(i, line.size());
        ASSERT_EQ(line[i], '"');
        std::string value;
        for (++i;; ++i) {
          ASSERT_LT(i, line.size()) << "unterminated label value";
          char c = line[i];
          if (c == '"') break;
          if (c == '\\') {
            ++i;
            ASSERT_LT(i, line.size());
            char e = line[i];
            ASSERT_TRUE(e == '\\' || e == '"' || e == 'n') << "bad escape \\" << e;
            value += e == 'n' ? '\n' : e;
          } else {
            value += c;
          }
        }
        ++i;  // past the quote
        s.labels[key] = value;
        ASSERT_LT(i, line.size());
        if (line[i] == ',')
          ++i;
        else
          ASSERT_EQ(line[i], '}');
      }
    }
    ASSERT_LT(i, line.size());
    ASSERT_EQ(line[i], ' ') << "one space before the value";
    std::string value = line.substr(i + 1);
    ASSERT_EQ(value.find(' '), std::string::npos) << "no timestamp expected";
    char* end = nullptr;
    s.value = std::strtod(value.c_str(), &end);
    ASSERT_TRUE(!value.empty() && *end == '\0') << "not a number: " << value;
    // promtool's rule: only a summary's quantile samples have a quantile label.
    const bool quantile_sample = out.types[fam] == "summary" && s.name == fam;
    ASSERT_EQ(s.labels.count("quantile") != 0, quantile_sample) << "quantile label on a non-summary sample";
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "\x1f" + k + "=" + v;
    ASSERT_TRUE(seen_series.insert(key).second) << "duplicate series";
    out.series.push_back(s);
  }
  for (const auto& [name, type] : out.types) EXPECT_TRUE(helped.count(name)) << name << " has no HELP";
}

Exposition parse_strict(const std::string& text) {
  Exposition out;
  parse_into(text, out);
  return out;
}

// `promtool check metrics` (Debian's prometheus package, which
// scripts/quickstart installs): its verdict too. Missing, it is a failure:
// the check never silently stops running.
void promtool_agrees(const std::string& text) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::istringstream split(dirs);
  for (std::string dir; std::getline(split, dir, ':');) {
    fs::path tool = fs::path(dir.empty() ? "." : dir) / "promtool";
    if (::access(tool.c_str(), X_OK) != 0) continue;
    auto r = run_command({tool.string(), "check", "metrics"}, {}, &text);
    EXPECT_EQ(r.exit_code, 0) << describe(r) << "\n" << text;
    // Lint findings are printed even when the exit status is 0.
    EXPECT_EQ(r.out + r.err, "") << text;
    return;
  }
  ADD_FAILURE() << "promtool is not installed (apt-get install prometheus; scripts/quickstart installs it)";
}

// The one label set every series carries, whatever the command; per-strategy
// series add strategy (and quantile), decisions strategy and by.
const std::set<std::string> kRunLabels{"command", "profile",  "transport", "manufacturer",
                                       "vendor",  "firmware", "emulated"};

void expect_run_labels(const Exposition& e, const std::string& command) {
  ASSERT_FALSE(e.series.empty());
  for (const Series& s : e.series) {
    SCOPED_TRACE(s.name);
    std::set<std::string> keys;
    for (const auto& [k, v] : s.labels) {
      if (k != "strategy" && k != "quantile" && k != "by") keys.insert(k);
    }
    EXPECT_EQ(keys, kRunLabels);
    EXPECT_EQ(s.labels.at("command"), command);
    // Every command here runs `--emulate slb9670` on the embedded TPM.
    EXPECT_EQ(s.labels.at("transport"), "embedded");
    EXPECT_EQ(s.labels.at("profile"), "slb9670");
    EXPECT_EQ(s.labels.at("emulated"), "true");
  }
}

// The tpmsec_decision_info series `by` names, if any.
const Series* decision(const Exposition& e, const std::string& by) {
  return e.find("tpmsec_decision_info", {{"by", by}});
}

class OpenMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tpmsec-openmetrics-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// The parser itself can fail: each rule it checks, broken once.
TEST(OpenMetricsFormat, TheParserRejectsWhatTheFormatForbids) {
  EXPECT_FATAL_FAILURE(parse_strict("tpmsec_x 1\n"), "sample before its TYPE");
  EXPECT_FATAL_FAILURE(parse_strict("# HELP tpmsec_x h\n# TYPE tpmsec_x gauge\ntpmsec_x{a=\"\\t\"} 1\n"), "bad escape");
  EXPECT_FATAL_FAILURE(
      parse_strict("# HELP tpmsec_x h\n# TYPE tpmsec_x gauge\ntpmsec_x{a=\"1\"} 1\ntpmsec_x{a=\"1\"} 2\n"),
      "duplicate series");
  EXPECT_FATAL_FAILURE(parse_strict("# HELP tpmsec_x h\n# TYPE tpmsec_x gauge\ntpmsec_x{1a=\"1\"} 1\n"), "label_name");
  EXPECT_FATAL_FAILURE(parse_strict("# HELP tpmsec_x h\n# TYPE tpmsec_x gauge\ntpmsec_x{a=\"1} 1\n"),
                       "unterminated label value");
  EXPECT_FATAL_FAILURE(parse_strict("# HELP tpmsec_x h\n# TYPE tpmsec_x gauge\ntpmsec_x one\n"), "not a number");
}

TEST(OpenMetricsFormat, LabelValuesAreEscapedAndReadBack) {
  nlohmann::json tpm = {{"manufacturer", "IFX"},
                        {"vendor", "a \"quoted\" back\\slash\nnew line"},
                        {"firmware_version", "7.85"},
                        {"emulated", true}};
  Distribution d;
  d.n = 10;
  d.median = 12.5;
  d.p99 = 20.25;
  std::string text = openmetrics_text(tpm, "swtpm:host=h,port=1", "bench",
                                      {{"resident", d, 3.0}, {"per-command", Distribution{}, 0.0}}, true);
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  const Series* median = e.find("tpmsec_extend_seconds", {{"strategy", "resident"}, {"quantile", "0.5"}});
  ASSERT_NE(median, nullptr) << text;
  EXPECT_EQ(median->labels.at("vendor"), "a \"quoted\" back\\slash\nnew line");
  EXPECT_EQ(median->labels.at("emulated"), "true");
  // The transport's kind, not its address: one series per kind across a fleet.
  EXPECT_EQ(median->labels.at("transport"), "swtpm");
  EXPECT_DOUBLE_EQ(median->value, 0.0125);
  const Series* p99 = e.find("tpmsec_extend_seconds", {{"strategy", "resident"}, {"quantile", "0.99"}});
  ASSERT_NE(p99, nullptr);
  EXPECT_DOUBLE_EQ(p99->value, 0.02025);
  const Series* commands = e.find("tpmsec_tpm_commands_per_extend", {{"strategy", "resident"}});
  ASSERT_NE(commands, nullptr);
  EXPECT_EQ(commands->value, 3.0);
  // A strategy with no measured extend has no series at all.
  EXPECT_EQ(e.find("tpmsec_extend_seconds", {{"strategy", "per-command"}}), nullptr) << text;
  EXPECT_EQ(e.find("tpmsec_tpm_commands_per_extend", {{"strategy", "per-command"}}), nullptr) << text;
  const Series* complete = e.find("tpmsec_run_complete", {});
  ASSERT_NE(complete, nullptr);
  EXPECT_EQ(complete->value, 1.0);
  promtool_agrees(text);
}

// Seconds at nanosecond resolution, in the shortest decimal that reads back
// as the same double: 148.920707 ms is 0.148920707, not 0.14892070699999999.
TEST(OpenMetricsFormat, ValuesAreShortestDecimalSeconds) {
  Distribution d;
  d.n = 3;
  d.median = 148.920707;
  d.p99 = 0.1;
  d.mean = 148.920707;
  std::string text =
      openmetrics_text({{"manufacturer", "IFX"}}, "device:/dev/tpmrm0", "bench", {{"resident", d, 3.0}}, true, 62.5);
  EXPECT_NE(text.find("quantile=\"0.5\"} 0.148920707\n"), std::string::npos) << text;
  EXPECT_NE(text.find("quantile=\"0.99\"} 0.0001\n"), std::string::npos) << text;
  EXPECT_NE(text.find("} 0.446762121\n"), std::string::npos) << text;  // the sum: 3 x the mean
  EXPECT_NE(text.find("tpmsec_budget_seconds{"), std::string::npos) << text;
  EXPECT_NE(text.find("} 0.0625\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("9999"), std::string::npos) << text;
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  EXPECT_EQ(e.find("tpmsec_extend_seconds_count", {{"strategy", "resident"}})->value, 3.0);
  EXPECT_EQ(e.find("tpmsec_extend_seconds", {})->labels.at("transport"), "device");
  promtool_agrees(text);
}

TEST(OpenMetricsFormat, DecisionsAndTheBudgetAreExported) {
  Distribution d;
  d.n = 2;
  d.median = d.p99 = d.mean = 20;
  std::string text = openmetrics_text({{"manufacturer", "IFX"}, {"emulated", true}, {"profile", "slb9670"}},
                                      "embedded emulating slb9670", "bench", {{"resident", d, 3.0}}, true, 50,
                                      {{"budget", "resident"}, {"policy", "per-command"}});
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  EXPECT_DOUBLE_EQ(e.find("tpmsec_budget_seconds", {})->value, 0.05);
  ASSERT_NE(decision(e, "budget"), nullptr) << text;
  EXPECT_EQ(decision(e, "budget")->labels.at("strategy"), "resident");
  EXPECT_EQ(decision(e, "budget")->value, 1.0);
  ASSERT_NE(decision(e, "policy"), nullptr) << text;
  EXPECT_EQ(decision(e, "policy")->labels.at("strategy"), "per-command");
  expect_run_labels(e, "bench");
  promtool_agrees(text);
  // Without them, no such families.
  std::string bare = openmetrics_text({}, "embedded", "bench", {}, false);
  EXPECT_EQ(bare.find("tpmsec_budget_seconds"), std::string::npos) << bare;
  EXPECT_EQ(bare.find("tpmsec_decision_info"), std::string::npos) << bare;
}

TEST(OpenMetricsFormat, AnIncompleteRunSaysSo) {
  std::string text = openmetrics_text({{"manufacturer", "MSFT"}}, "embedded", "policy calibrate", {}, false);
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  ASSERT_EQ(e.series.size(), 1u) << text;
  EXPECT_EQ(e.series[0].name, "tpmsec_run_complete");
  EXPECT_EQ(e.series[0].value, 0.0);
  EXPECT_EQ(e.series[0].labels.at("emulated"), "false");
  EXPECT_EQ(e.series[0].labels.at("command"), "policy calibrate");
  promtool_agrees(text);
}

TEST_F(OpenMetricsTest, BenchWritesEveryStrategyItMeasured) {
  fs::path file = dir_ / "tpmsec.prom";
  auto r = run_tpmsec({"bench", "--emulate", "slb9670", "--iterations", "3", "--no-primitives", "--strategies",
                       "resident,per-command", "--openmetrics", file.string()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::string text = slurp(file);
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  // The two asked for and plain, the baseline their ratios are to: median and p99 each.
  EXPECT_EQ(e.count("tpmsec_extend_seconds"), 6u) << text;
  for (const char* s : {"resident", "per-command", "plain"}) {
    const Series* c = e.find("tpmsec_tpm_commands_per_extend", {{"strategy", s}});
    ASSERT_NE(c, nullptr) << s << "\n" << text;
    EXPECT_GE(c->value, 1.0);
    EXPECT_EQ(c->labels.at("emulated"), "true");
    EXPECT_EQ(c->labels.at("command"), "bench");
    const Series* n = e.find("tpmsec_extend_samples", {{"strategy", s}});
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->value, 2.0);  // steady state: the first extend is reported apart
  }
  // per-command opens a session per extend: more commands than resident.
  EXPECT_GT(e.find("tpmsec_tpm_commands_per_extend", {{"strategy", "per-command"}})->value,
            e.find("tpmsec_tpm_commands_per_extend", {{"strategy", "resident"}})->value);
  EXPECT_EQ(e.find("tpmsec_run_complete", {})->value, 1.0);
  // Its recommendation, the policy's decision and the budget (bench's --budget-ms).
  ASSERT_NE(decision(e, "budget"), nullptr) << text;
  ASSERT_NE(decision(e, "policy"), nullptr) << text;
  ASSERT_NE(e.find("tpmsec_budget_seconds", {}), nullptr) << text;
  EXPECT_GT(e.find("tpmsec_budget_seconds", {})->value, 0.0);
  expect_run_labels(e, "bench");
  EXPECT_EQ(std::vector<fs::path>(fs::directory_iterator(dir_), {}), std::vector<fs::path>{file}) << "temp file left";
  promtool_agrees(text);
}

TEST_F(OpenMetricsTest, DashIsStandardOutputAndTheReportMovesToStandardError) {
  auto r = run_tpmsec({"bench", "--emulate", "slb9670", "--iterations", "2", "--no-primitives", "--strategies",
                       "resident", "--openmetrics", "-"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  parse_strict(r.out);
  EXPECT_NE(r.err.find("recommendation"), std::string::npos) << r.err;
}

TEST_F(OpenMetricsTest, BadPathIsAUsageErrorBeforeAnyWork) {
  for (std::vector<std::string> cmd :
       {std::vector<std::string>{"bench", "--emulate", "slb9670", "--iterations", "2", "--no-primitives"},
        std::vector<std::string>{"replay", "--emulate", "slb9670", "--ima", "/nonexistent"},
        std::vector<std::string>{"policy", "calibrate", "--emulate", "slb9670"}}) {
    cmd.insert(cmd.end(), {"--openmetrics", (dir_ / "missing" / "x.prom").string()});
    auto r = run_tpmsec(cmd);
    EXPECT_EQ(r.exit_code, testing::kExitUsage) << describe(r);
    EXPECT_NE(r.err.find("does not exist"), std::string::npos) << describe(r);
  }
}

TEST_F(OpenMetricsTest, CalibrateWritesItsMeasurements) {
  fs::path file = dir_ / "calibrate.prom";
  auto r = run_tpmsec({"policy", "calibrate", "--emulate", "slb9670", "--iterations", "3", "--max-seconds", "600",
                       "--openmetrics", file.string()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("decision"), std::string::npos) << r.out;
  std::string text = slurp(file);
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  for (const char* s : {"plain", "checkpoint", "resident", "saved-context", "per-command"}) {
    EXPECT_NE(e.find("tpmsec_extend_seconds", {{"strategy", s}, {"quantile", "0.99"}}), nullptr) << s << "\n" << text;
  }
  EXPECT_EQ(e.find("tpmsec_run_complete", {{"command", "policy calibrate"}})->value, 1.0);
  // The decision the report prints, and the budget it was made under.
  const Series* chosen = decision(e, "budget");
  ASSERT_NE(chosen, nullptr) << text;
  EXPECT_NE(r.out.find("PCR extends: " + chosen->labels.at("strategy") + " ("), std::string::npos) << r.out;
  ASSERT_NE(e.find("tpmsec_budget_seconds", {}), nullptr) << text;
  EXPECT_GT(e.find("tpmsec_budget_seconds", {})->value, 0.0);
  expect_run_labels(e, "policy calibrate");
  promtool_agrees(text);
}

TEST_F(OpenMetricsTest, ReplayWritesItsStrategy) {
  fs::path log = dir_ / "ascii_runtime_measurements";
  std::vector<testing::ImaRecord> records;
  for (int i = 0; i < 5; ++i) records.push_back(testing::sample_ima_record("ima-ng", i));
  {
    std::ofstream out(log, std::ios::binary);
    out << testing::ima_ascii_log(records);
  }
  fs::path file = dir_ / "replay.prom";
  auto r = run_tpmsec({"replay", "--emulate", "slb9670", "--ima", log.string(), "--strategy", "resident",
                       "--openmetrics", file.string()});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::string text = slurp(file);
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  const Series* c = e.find("tpmsec_tpm_commands_per_extend", {{"strategy", "resident"}, {"command", "replay"}});
  ASSERT_NE(c, nullptr) << describe(r) << text;
  EXPECT_EQ(e.find("tpmsec_extend_samples", {{"strategy", "resident"}})->value, 5.0) << text;
  expect_run_labels(e, "replay");
  promtool_agrees(text);
}

// Whether `pid` has a handler installed for `sig` (/proc/PID/status SigCgt):
// the CLI is inside its run.
// An interrupted bench: no series for the strategy it never reached, and
// tpmsec_run_complete 0.
TEST_F(OpenMetricsTest, AnInterruptedBenchHasNoSeriesForWhatItDidNotMeasure) {
  fs::path file = dir_ / "bench.prom";
  fs::path out = dir_ / "stdout", err = dir_ / "stderr";
  pid_t pid = ::fork();
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
    ::dup2(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600), 2);
    ::setenv("TPMSEC_TPM", "embedded", 1);
    ::execl(TPMSEC_CLI_PATH, TPMSEC_CLI_PATH, "bench", "--emulate", "slb9670", "--iterations", "1000000",
            "--no-primitives", "--strategies", "resident,per-command", "--openmetrics", file.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  const bool exited = !testing::wait_until_it_catches(pid, SIGTERM, &status);
  ASSERT_FALSE(exited) << "bench ended before it was signalled, status " << status;
  ::kill(pid, SIGTERM);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::string text = slurp(file);
  Exposition e = parse_strict(text);
  ASSERT_FALSE(HasFailure()) << text;
  const Series* complete = e.find("tpmsec_run_complete", {});
  ASSERT_NE(complete, nullptr) << text;
  EXPECT_EQ(complete->value, 0.0);
  // A million resident extends cannot have finished: per-command never began.
  EXPECT_EQ(e.find("tpmsec_extend_seconds", {{"strategy", "per-command"}}), nullptr) << text;
  EXPECT_EQ(e.find("tpmsec_tpm_commands_per_extend", {{"strategy", "per-command"}}), nullptr) << text;
  // Nothing decided from partial data, and the report says why.
  EXPECT_EQ(e.count("tpmsec_decision_info"), 0u) << text;
  std::string report = slurp(out);
  EXPECT_NE(report.find("recommendation: none, the run was interrupted"), std::string::npos) << report;
  EXPECT_EQ(report.find("policy: "), std::string::npos) << report;
  EXPECT_NE(slurp(err).find("interrupted"), std::string::npos) << slurp(err);
  promtool_agrees(text);
}

}  // namespace
}  // namespace tpmsec
