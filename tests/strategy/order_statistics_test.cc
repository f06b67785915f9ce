// The core's order statistics (tpmsec/order_statistics.h): the one median,
// quantile and upper-tail mean that the benchmarks' distributions and the
// profiles imported from tpm2-algtest are computed with.
#include <gtest/gtest.h>

#include <vector>

#include "tpmsec/measure/statistics.h"
#include "tpmsec/order_statistics.h"

namespace tpmsec {
namespace {

TEST(OrderStatistics, MedianOfNoneIsZero) { EXPECT_EQ(median_of({}), 0.0); }

TEST(OrderStatistics, MedianOfAnOddCountIsTheMiddleValueInAnyOrder) {
  EXPECT_EQ(median_of({7}), 7.0);
  EXPECT_EQ(median_of({9, 1, 5}), 5.0);
  EXPECT_EQ(median_of({3, 100, 2, 1, 50}), 3.0);
}

TEST(OrderStatistics, MedianOfAnEvenCountIsTheMeanOfTheTwoMiddleValues) {
  EXPECT_EQ(median_of({4, 1}), 2.5);
  EXPECT_EQ(median_of({10, 1, 3, 4}), 3.5);
  // (a + b) / 2, not a + (b - a) / 2: the figures of earlier imports.
  EXPECT_EQ(median_of({0.1, 0.7}), (0.1 + 0.7) / 2);
}

TEST(OrderStatistics, QuantileOfNoneIsZero) { EXPECT_EQ(quantile_of({}, 0.5), 0.0); }

TEST(OrderStatistics, QuantileEndsAreTheMinimumAndTheMaximum) {
  std::vector<double> sorted = {1, 2, 4, 8};
  EXPECT_EQ(quantile_of(sorted, 0), 1.0);
  EXPECT_EQ(quantile_of(sorted, 1), 8.0);
  EXPECT_EQ(quantile_of({42}, 0.95), 42.0);
}

TEST(OrderStatistics, QuantileInterpolatesLinearlyBetweenClosestRanks) {
  // Ranks 0..10 over the values 0, 10, .., 100: q x 10 is the rank.
  std::vector<double> sorted;
  for (int i = 0; i <= 10; ++i) sorted.push_back(10.0 * i);
  EXPECT_DOUBLE_EQ(quantile_of(sorted, 0.5), 50.0);
  EXPECT_DOUBLE_EQ(quantile_of(sorted, 0.05), 5.0);
  EXPECT_DOUBLE_EQ(quantile_of(sorted, 0.95), 95.0);
  // Between ranks 1 and 2 of {1, 3, 7}: rank 0.75 x 2 = 1.5.
  EXPECT_DOUBLE_EQ(quantile_of({1, 3, 7}, 0.75), 5.0);
  // An even count's 0.5 quantile is its median.
  EXPECT_DOUBLE_EQ(quantile_of({1, 2, 3, 10}, 0.5), median_of({1, 2, 3, 10}));
}

TEST(OrderStatistics, UpperTailMeanAveragesFromRankFloorOfQTimesN) {
  EXPECT_EQ(upper_tail_mean({}, 0.95), 0.0);
  // 20 values 1..20: floor(0.95 x 20) = 19, the top one alone.
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(i);
  EXPECT_EQ(upper_tail_mean(twenty, 0.95), 20.0);
  // 40 values: floor(38.0) = 38, the mean of 39 and 40.
  std::vector<double> forty;
  for (int i = 1; i <= 40; ++i) forty.push_back(i);
  EXPECT_EQ(upper_tail_mean(forty, 0.95), 39.5);
  // q = 0: the mean of all; q at or past 1: the maximum, never an empty mean.
  EXPECT_EQ(upper_tail_mean({1, 2, 3, 6}, 0), 3.0);
  EXPECT_EQ(upper_tail_mean({1, 2, 3, 6}, 1), 6.0);
}

// The benchmarks' distribution is computed with the same quantile.
TEST(OrderStatistics, SummarizeUsesTheCoreQuantile) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i * 0.37);
  Distribution d = summarize(samples);
  std::vector<double> sorted(samples.rbegin(), samples.rend());
  EXPECT_EQ(d.n, 100u);
  EXPECT_EQ(d.min, sorted.front());
  EXPECT_EQ(d.max, sorted.back());
  EXPECT_EQ(d.median, quantile_of(sorted, 0.50));
  EXPECT_EQ(d.p90, quantile_of(sorted, 0.90));
  EXPECT_EQ(d.p99, quantile_of(sorted, 0.99));
  EXPECT_DOUBLE_EQ(d.p90, 0.37 * (1 + 0.9 * 99));
}

}  // namespace
}  // namespace tpmsec
