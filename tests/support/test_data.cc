#include "support/test_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

namespace tpmsec::testing {

Bytes H(std::string_view hex) {
  auto b = from_hex(hex);
  EXPECT_TRUE(b.ok()) << hex;
  return b.ok() ? *b : Bytes{};
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Bytes J(const nlohmann::json& j) { return H(j.get<std::string>()); }

nlohmann::json load_test_json(const std::string& file) {
  std::ifstream in(std::string(TPMSEC_TEST_DATA) + "/" + file);
  if (!in) {
    ADD_FAILURE() << "cannot open " << TPMSEC_TEST_DATA << "/" << file;
    return nlohmann::json::array();
  }
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

}  // namespace tpmsec::testing
