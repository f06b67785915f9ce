#ifndef TPMSEC_HOST_DATA_DIR_H_
#define TPMSEC_HOST_DATA_DIR_H_

#include <string>

namespace tpmsec {

// Where the shipped data (profiles/, policy/, schema/) lives, decided once per call:
//   1. $TPMSEC_DATA_DIR if set and non-empty;
//   2. <directory of the running program>/share/tpmsec, if it exists: a build
//      tree (the build links <build>/share/tpmsec to the source tree's data/);
//   3. otherwise <directory of the running program>/../share/tpmsec: an
//      installed tpmsec (/usr/bin/tpmsec reads /usr/share/tpmsec, a moved
//      prefix keeps working), and a build tree's tests and benchmarks one
//      directory below the CLI. Errors then name the path a user expects;
//   4. but when that does not exist and /usr/share/tpmsec does, the latter:
//      a program of its own on the library (examples/protected_extend.cc)
//      finds the distribution's data.
// No path of the source, build or install tree is compiled in.
std::string data_dir();

}  // namespace tpmsec

#endif  // TPMSEC_HOST_DATA_DIR_H_
