#include "support/test_data.h"

#include <stdlib.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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

std::string make_temp_dir(const std::string& prefix) {
  std::error_code ec;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  if (ec) return {};
  std::string tmpl = (tmp / (prefix + "-XXXXXX")).string();
  return ::mkdtemp(tmpl.data()) ? tmpl : std::string();
}

bool contains(ByteView haystack, ByteView needle) {
  return !needle.empty() &&
         std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
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
