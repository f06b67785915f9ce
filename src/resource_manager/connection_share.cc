#include "resource_manager/connection_share.h"

#include <map>

namespace tpmsec::server {

std::optional<size_t> connection_to_close(const std::vector<ConnectionView>& front,
                                          const std::optional<uint32_t>& uid) {
  std::map<std::optional<uint32_t>, size_t> held;
  for (const ConnectionView& c : front) ++held[c.uid];
  const size_t mine = held[uid];
  // The uids that may give way, most first; the first with an idle connection.
  std::optional<size_t> best;
  size_t best_held = 0;
  for (size_t i = 0; i < front.size(); ++i) {
    const ConnectionView& c = front[i];
    const size_t n = held[c.uid];
    if (!c.idle || c.uid == uid || n < mine + 2) continue;
    if (!best || n > best_held || (n == best_held && c.active_at < front[*best].active_at)) {
      best = i;
      best_held = n;
    }
  }
  return best;
}

}  // namespace tpmsec::server
