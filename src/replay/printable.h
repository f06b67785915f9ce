// Quoting hostile text in error messages.
#ifndef TPMSEC_SRC_REPLAY_PRINTABLE_H_
#define TPMSEC_SRC_REPLAY_PRINTABLE_H_

#include <string>
#include <string_view>

namespace tpmsec::replay_internal {

// `text` cut to `max` bytes (then "…"), with every byte outside printable
// ASCII shown as \xHH, so a log cannot put control bytes on a terminal.
std::string printable(std::string_view text, size_t max = 64);

}  // namespace tpmsec::replay_internal

#endif  // TPMSEC_SRC_REPLAY_PRINTABLE_H_
