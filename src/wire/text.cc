#include "tpmsec/text.h"

#include <cctype>

namespace tpmsec {

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matcher with single-star backtracking: linear in practice, no recursion.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  auto class_match = [&](size_t at, char c, size_t* next) {
    // pattern[at] == '['; returns whether c is in the class, sets *next past ']'.
    size_t i = at + 1;
    bool negate = i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^');
    if (negate) ++i;
    bool found = false;
    size_t first = i;
    while (i < pattern.size() && (pattern[i] != ']' || i == first)) {
      if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
        if (pattern[i] <= c && c <= pattern[i + 2]) found = true;
        i += 3;
      } else {
        if (pattern[i] == c) found = true;
        ++i;
      }
    }
    if (i >= pattern.size()) return false;  // unterminated class matches nothing
    *next = i + 1;
    return found != negate;
  };
  while (t < text.size()) {
    size_t next = 0;
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == '?') {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '[' && class_match(p, text[t], &next)) {
      p = next;
      ++t;
    } else if (p < pattern.size() && pattern[p] != '[' && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string> split_list(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string_view item =
        list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  size_t start = s.find_first_not_of(kSpace);
  if (start == std::string_view::npos) return {};
  return s.substr(start, s.find_last_not_of(kSpace) - start + 1);
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace tpmsec
