// The project's test data (tests/data) and the helpers every known-answer
// test needs to read it.
#ifndef TPMSEC_TESTS_SUPPORT_TEST_DATA_H_
#define TPMSEC_TESTS_SUPPORT_TEST_DATA_H_

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/bytes.h"

namespace tpmsec::testing {

// Bytes of a hex string; a test failure (and empty bytes) when it is not hex.
Bytes H(std::string_view hex);
// The whole of a file as bytes in a string (empty when it cannot be read).
std::string slurp(const std::string& path);
// A new directory PREFIX-XXXXXX in the temporary directory, mode 0700 (mkdtemp);
// empty when it cannot be made.
std::string make_temp_dir(const std::string& prefix);
// Whether `needle` (not empty) stands in `haystack`: a secret seen on a bus.
bool contains(ByteView haystack, ByteView needle);
// Bytes of a JSON string holding hex.
Bytes J(const nlohmann::json& j);

// tests/data/FILE parsed as JSON; a test failure (and an empty array) when missing.
nlohmann::json load_test_json(const std::string& file);

// One vector of a known-answer file, named by its "Name" for gtest.
struct Case {
  std::string name;
  nlohmann::json data;
};
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_TEST_DATA_H_
