#include "replay/printable.h"

#include <fmt/format.h>

namespace tpmsec::replay_internal {

std::string printable(std::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (text.size() > max) out += "…";
  return out;
}

}  // namespace tpmsec::replay_internal
