// Which connections share a handle space, and when a space ends
// (server/process_spaces.h).
#include "resource_manager/process_spaces.h"

#include <algorithm>

#include <fmt/format.h>

#include "tpmsec-server/resource_manager/log_priority.h"

namespace tpmsec::server {

SharedSpace* ProcessSpaces::find(const ProcessKey& process) {
  for (const auto& s : spaces_) {
    if (s->process == process && !s->exited) return s.get();
  }
  return nullptr;
}

SharedSpace& ProcessSpaces::add(std::unique_ptr<SharedSpace> space) {
  spaces_.push_back(std::move(space));
  return *spaces_.back();
}

void ProcessSpaces::end(const SharedSpace& space, const char* why) {
  if (log_ && space.process) {
    log_(fmt::format("{}the handle space of uid {} pid {} ends: {}", kLogDebug, space.process->uid, space.process->pid,
                     why));
  }
  // Erasing destroys the front, then the space: what it held is flushed.
  std::erase_if(spaces_, [&](const auto& s) { return s.get() == &space; });
}

void ProcessSpaces::leave(SharedSpace& space, int64_t now) {
  if (space.connections > 0) --space.connections;
  space.active_at = now;
  if (space.connections > 0) return;
  if (space.exited || !space.exit.valid()) {
    end(space, space.exited ? "its process exited and its last connection closed" : "its last connection closed");
    return;
  }
  bound_kept(space);
}

// The uid of `left` holds at most max_kept_ spaces without a connection:
// its least recently active ones end (another uid's never do).
void ProcessSpaces::bound_kept(const SharedSpace& left) {
  const uint32_t uid = left.process->uid;
  for (;;) {
    std::vector<const SharedSpace*> kept;
    for (const auto& s : spaces_) {
      if (s->connections == 0 && s->process && s->process->uid == uid) kept.push_back(s.get());
    }
    if (kept.size() <= max_kept_) return;
    const SharedSpace* oldest = *std::min_element(
        kept.begin(), kept.end(), [](const auto* a, const auto* b) { return a->active_at < b->active_at; });
    end(*oldest, "its uid keeps more spaces without a connection than --max-connections");
  }
}

void ProcessSpaces::watch(std::vector<pollfd>& fds) {
  watched_.clear();
  for (const auto& s : spaces_) {
    if (!s->exit.valid() || s->exited) continue;
    fds.push_back({s->exit.get(), POLLIN, 0});
    watched_.push_back(s.get());
  }
}

void ProcessSpaces::note_exits(const std::vector<pollfd>& fds, size_t first) {
  std::vector<SharedSpace*> gone;
  for (size_t i = 0; i < watched_.size() && first + i < fds.size(); ++i) {
    if (fds[first + i].revents) gone.push_back(watched_[i]);
  }
  watched_.clear();
  for (SharedSpace* s : gone) {
    s->exited = true;
    s->exit = Fd();
    if (s->connections == 0) end(*s, "its process exited");
  }
}

}  // namespace tpmsec::server
