// Reading tpm2-algtest's result files: the YAML subset of performance.yaml,
// the fixed properties and the Perf_*.csv durations (algtest_files.h).
#include "algtest_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "tpmsec/text.h"

namespace tpmsec::algtest {

namespace fs = std::filesystem;

std::string item_text(std::string_view s) {
  s.remove_prefix(std::min(s.find_first_not_of(" \t\r-"), s.size()));
  return std::string(trim(s));
}

std::string unquote(std::string s) {
  s = item_text(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

bool read_text(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream b;
  b << in.rdbuf();
  *out = b.str();
  return !in.bad();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<YamlEntry> yaml_entries(const std::string& text, std::map<std::string, std::string>* header) {
  std::vector<YamlEntry> out;
  std::string section;
  for (const std::string& raw : lines_of(text)) {
    if (raw.empty() || item_text(raw).empty()) continue;
    bool top = raw[0] != ' ' && raw[0] != '-';
    size_t colon = raw.find(':');
    if (top) {
      if (raw.rfind("TPM2_", 0) == 0 && colon != std::string::npos && item_text(raw.substr(colon + 1)).empty()) {
        section = raw.substr(0, colon);
      } else if (colon != std::string::npos && section.empty()) {
        (*header)[raw.substr(0, colon)] = unquote(raw.substr(colon + 1));
      }
      continue;
    }
    if (section.empty()) continue;
    if (raw[raw.find_first_not_of(' ')] == '-') {
      out.push_back(YamlEntry{section, {}});
    }
    if (out.empty() || colon == std::string::npos) continue;
    out.back().fields[item_text(raw.substr(0, colon))] = item_text(raw.substr(colon + 1));
  }
  return out;
}

bool number(const std::string& s, double* v) {
  try {
    size_t used = 0;
    *v = std::stod(s, &used);
    return used > 0 && std::isfinite(*v);
  } catch (...) {
    return false;
  }
}

// Successful iterations of a CSV (duration,duration_extra,return_code), in ms.
Result<std::vector<double>> read_csv(const fs::path& path) {
  std::string text;
  if (!read_text(path, &text)) return usage_error(fmt::format("{}: cannot read", path.string()));
  std::vector<double> out;
  size_t n = 0;
  for (const std::string& line : lines_of(text)) {
    ++n;
    if (n == 1 || item_text(line).empty()) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cols.push_back(item_text(c));
    double seconds = 0;
    if (cols.size() < 3 || !number(cols[0], &seconds) || seconds < 0) {
      return usage_error(fmt::format("{}: line {} is not 'duration,duration_extra,return_code'", path.string(), n));
    }
    if (cols[2] != "0000" && cols[2] != "0") continue;
    out.push_back(seconds * 1000.0);
  }
  return out;
}

FixedProperties fixed_properties(const std::string& text) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  std::string current;
  for (const std::string& raw : lines_of(text)) {
    if (raw.empty()) continue;
    size_t colon = raw.find(':');
    if (colon == std::string::npos) continue;
    if (raw[0] != ' ') {
      current = raw.substr(0, colon);
      out[current];
    } else if (!current.empty()) {
      std::string key = item_text(raw.substr(0, colon));
      if (key == "raw") out[current].first = item_text(raw.substr(colon + 1));
      if (key == "value") out[current].second = unquote(raw.substr(colon + 1));
    }
  }
  return out;
}

uint32_t raw_value(const FixedProperties& props, const char* name) {
  auto it = props.find(name);
  if (it == props.end() || it->second.first.empty()) return 0;
  try {
    return static_cast<uint32_t>(std::stoul(it->second.first, nullptr, 0));
  } catch (...) {
    return 0;
  }
}

}  // namespace tpmsec::algtest
