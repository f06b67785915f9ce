// The few SVG pieces tpmsec's charts share (bench_chart.cc, bench_compare.cc):
// one escaping routine, one palette, one document frame.
#ifndef TPMSEC_MEASURE_SVG_H_
#define TPMSEC_MEASURE_SVG_H_

#include <string>

namespace tpmsec::svg {

// `s` with the XML special characters (<, >, &, ") escaped, for text and attributes.
std::string escape(const std::string& s);

// The i-th colour of a ten-colour palette (wraps around).
const char* color(size_t i);

// An <svg> start tag of `width` x `height` on a white background; close with end().
std::string begin(int width, int height);
std::string end();

}  // namespace tpmsec::svg

#endif  // TPMSEC_MEASURE_SVG_H_
