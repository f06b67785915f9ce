// The command table's lookups (command_table.h).
#include "tpmsec/command_table.h"

#include <algorithm>
#include <iterator>

namespace tpmsec {
namespace {

// find_command() searches by halves, so the table must ascend; ascending
// strictly also means no code is in it twice.
constexpr bool strictly_ascending() {
  for (size_t i = 1; i < std::size(kCommandTable); ++i) {
    if (kCommandTable[i - 1].code >= kCommandTable[i].code) return false;
  }
  return true;
}
static_assert(strictly_ascending(), "kCommandTable: codes must ascend, each once");

constexpr bool auths_within_handles() {
  for (const CommandInfo& c : kCommandTable) {
    if (c.auth_count > c.handle_count || c.response_handle_count > 1) return false;
    if (c.creates_handle != (c.response_handle_count == 1)) return false;
  }
  return true;
}
static_assert(auths_within_handles(),
              "kCommandTable: authorizations are among the handles; one response handle at most, and it is created");

}  // namespace

std::span<const CommandInfo> all_commands() { return kCommandTable; }

const CommandInfo* find_command(uint32_t code) {
  auto it = std::lower_bound(std::begin(kCommandTable), std::end(kCommandTable), code,
                             [](const CommandInfo& c, uint32_t v) { return c.code < v; });
  return it != std::end(kCommandTable) && it->code == code ? &*it : nullptr;
}

}  // namespace tpmsec
