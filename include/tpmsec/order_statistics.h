// Order statistics of latency samples: the one median, quantile and upper-tail
// mean that the benchmarks (measure), the latency profiles from tpm2-algtest
// (emulation) and their reports share. Plain arithmetic on doubles: the same
// input gives the same bits on every machine, so the profiles and figures
// computed from recorded samples are reproducible.
#ifndef TPMSEC_ORDER_STATISTICS_H_
#define TPMSEC_ORDER_STATISTICS_H_

#include <vector>

namespace tpmsec {

// The median of `values`, in any order: the middle value, or the mean of the
// two middle ones for an even count; 0 for none.
double median_of(std::vector<double> values);

// The quantile q (0..1) of `sorted` (ascending) by linear interpolation
// between closest ranks: rank q x (n - 1), 0 the minimum, 1 the maximum; 0 for
// none. For an even count, quantile_of(sorted, 0.5) is the median up to rounding.
double quantile_of(const std::vector<double>& sorted, double q);

// The mean of the top of `sorted` (ascending) from rank floor(q x n) on: with
// q = 0.95, the mean of the slowest 5% (at least the maximum); 0 for none.
double upper_tail_mean(const std::vector<double>& sorted, double q);

}  // namespace tpmsec

#endif  // TPMSEC_ORDER_STATISTICS_H_
