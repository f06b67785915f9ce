// Small text helpers shared by the profile, policy and command-line parsers.
#ifndef TPMSEC_TEXT_H_
#define TPMSEC_TEXT_H_

#include <string>
#include <string_view>
#include <vector>

namespace tpmsec {

// Whether `text` matches `pattern`: * any run, ? one character, [abc] [a-z]
// [!abc] classes (an unterminated class matches nothing); case-sensitive.
bool glob_match(std::string_view pattern, std::string_view text);

// The non-empty items of a comma-separated list ("a,,b" -> {"a", "b"}).
std::vector<std::string> split_list(std::string_view list);

// `s` without leading and trailing white space (space, tab, CR, LF).
std::string_view trim(std::string_view s);

// `s` with ASCII letters in lower case (names, manufacturers: no locale).
std::string ascii_lower(std::string_view s);

}  // namespace tpmsec

#endif  // TPMSEC_TEXT_H_
