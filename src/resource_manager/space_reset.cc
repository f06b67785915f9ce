// A TPM reset under the manager (handle_space.h, tpm_was_reset()): the
// TPM flushed every transient object and session, and every saved context
// went invalid with its reset count. The manager's records of them would
// name handles the TPM now gives to others: a new object at an old
// object's handle refused as "a client's", a client's old virtual handle
// translated to another's object. They are dropped, never flushed.
#include <fmt/format.h>

#include <vector>

#include "resource_manager/space_state.h"

namespace tpmsec::server {

void ResourceManager::Impl::forget_reset() {
  reset_pending_ = false;
  size_t objects = 0;
  for (auto& [id, c] : clients_) {
    objects += c.objects.size();
    c.objects.clear();  // virtual handles count on (Client::next): an old one stays unknown
  }
  const size_t sessions = sessions_.size();
  std::vector<uint32_t> ended;
  for (const auto& [h, s] : sessions_) ended.push_back(h);
  for (uint32_t h : ended) end_session(h);  // reported: the wrapper's state under each goes too
  abandoned_.clear();
  // The server's own: its owner starts another session (ProtectedServer's
  // recover()); a flush of the old handle is then refused here, not sent.
  std::erase_if(reserved_, [](uint32_t h) { return is_transient(h) || ht::is_session(h); });
  server_sessions_.clear();
  // Whatever the TPM holds that nobody does (a command in flight at the
  // reset, answered after it) is swept when the TPM is full and at shutdown.
  orphans_possible_ = true;
  note(
      fmt::format("{}the TPM was reset: forgot every client's {} object(s) and {} session(s), unflushed (the reset "
                  "flushed them)",
                  kLogWarning, objects, sessions));
}

}  // namespace tpmsec::server
