// One recommendation: bench, policy show and policy calibrate decide through
// one function (strategy_choice.h), so on every profile they agree.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "support/run_command.h"
#include "support/test_data.h"
#include "tpmsec/calibration/calibration.h"
#include "tpmsec/emulation/profile_file.h"

namespace tpmsec {
namespace {

using testing::describe;
using testing::run_tpmsec;

// The strategy a line names: "recommendation: resident (prevention) — ...".
std::string strategy_after(const std::string& text, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(label + R"(\s*(?:PCR extends: )?([a-z-]+) \()"))) return "";
  return m[1];
}

std::vector<std::string> profile_names() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(profiles_dir())) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(OneRecommendation, BenchPolicyShowAndCalibrateAgreeOnEveryProfile) {
  const auto names = profile_names();
  ASSERT_GE(names.size(), 10u);
  for (const std::string& p : names) {
    SCOPED_TRACE(p);
    auto bench = run_tpmsec({"bench", "--emulate", p, "--iterations", "10", "--no-primitives"});
    ASSERT_EQ(bench.exit_code, 0) << describe(bench);
    auto show = run_tpmsec({"policy", "show", "--emulate", p});
    ASSERT_EQ(show.exit_code, 0) << describe(show);
    const std::string recommended = strategy_after(bench.out, "recommendation:");
    EXPECT_FALSE(recommended.empty()) << bench.out;
    EXPECT_EQ(recommended, strategy_after(bench.out, "policy:")) << bench.out;
    EXPECT_EQ(recommended, strategy_after(show.out, "decision")) << show.out;

    // Below the prevention floor too, from the same kind of measurement.
    auto bench_d = run_tpmsec({"bench", "--emulate", p, "--iterations", "12", "--no-primitives", "--allow-detection"});
    ASSERT_EQ(bench_d.exit_code, 0) << describe(bench_d);
    auto calibrate = run_tpmsec({"policy", "calibrate", "--emulate", p, "--iterations", "12", "--allow-detection"});
    ASSERT_EQ(calibrate.exit_code, 0) << describe(calibrate);
    EXPECT_EQ(strategy_after(bench_d.out, "recommendation:"), strategy_after(calibrate.out, "decision"))
        << bench_d.out << calibrate.out;
  }
}

// Within the measured noise, the more protective strategy wins a tie.
TEST(OneRecommendation, ATieWithinTheNoiseGoesToTheMoreProtective) {
  StrategyCosts costs;
  costs.per_extend_ms = {
      {StrategyKind::kPlain, 32.000}, {StrategyKind::kCheckpoint, 32.015}, {StrategyKind::kResident, 47.0}};
  Calibration c = choose_strategy(costs, 20.0, ProtectionFloor::kNone);
  EXPECT_EQ(c.extend, StrategyKind::kCheckpoint) << c.reason;
  EXPECT_NE(c.reason.find("within the measured noise"), std::string::npos) << c.reason;
  // A real difference is not a tie.
  costs.per_extend_ms[StrategyKind::kCheckpoint] = 34.0;
  EXPECT_EQ(choose_strategy(costs, 20.0, ProtectionFloor::kNone).extend, StrategyKind::kPlain);
  // A noisy measurement widens what counts as a tie.
  costs.noise_ms = {{StrategyKind::kPlain, 1.0}, {StrategyKind::kCheckpoint, 1.5}};
  EXPECT_EQ(choose_strategy(costs, 20.0, ProtectionFloor::kNone).extend, StrategyKind::kCheckpoint);
}

}  // namespace
}  // namespace tpmsec
