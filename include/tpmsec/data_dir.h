#pragma once
#include <string>

namespace tpmsec {

// Where the shipped data (profiles/, policy/, schema/) lives, decided once per call:
//   1. $TPMSEC_DATA_DIR if set and non-empty;
//   2. <directory of the running program>/../share/tpmsec, if it exists (an
//      installed tpmsec, wherever the prefix was moved to);
//   3. the configured install location (<prefix>/share/tpmsec), if it exists;
//   4. the source tree's data/ (uninstalled builds), unless the build was
//      configured with -DTPMSEC_SOURCE_DATA_FALLBACK=OFF.
// With none found, the install location: errors then name a path a user expects.
std::string data_dir();

}  // namespace tpmsec
