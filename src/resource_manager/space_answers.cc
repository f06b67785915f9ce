// Handles the TPM names in its answers to the manager's own commands and to
// a client's (space_state.h). Nothing authenticates them: an interposer on
// the bus rewrites a ContextLoad's or a CreatePrimary's handle at will. So an
// answer never makes the manager flush, or hand to a client, a handle that
// another client or the server holds.
#include <fmt/format.h>

#include "resource_manager/space_state.h"
#include "resource_manager/tpm_calls.h"

namespace tpmsec::server {

// Held: a client's loaded object, a session of a client's (loaded or saved:
// it keeps its handle), or the server's own.
bool ResourceManager::Impl::held(uint32_t h) const {
  if (reserved_.count(h) || sessions_.count(h)) return true;
  for (const auto& [id, c] : clients_) {
    for (const auto& [v, o] : c.objects) {
      if (o.loaded == h) return true;
    }
  }
  return false;
}

// An answer gave `h` where the manager expected another handle (a session
// loaded back under another, an object ContextLoad answered with a session):
// what the TPM loaded there is nobody's and is flushed, unless the handle is
// held, when the answer was forged and what it names stays its holder's.
void ResourceManager::Impl::release_unexpected(uint32_t h) {
  if (h == 0) return;
  orphans_possible_ = true;
  if (held(h)) {
    note(fmt::format("space: an answer named 0x{:08x}, which another holds: left alone", h));
    return;
  }
  (void)flush_context(tpm_, h);
}

// The TPM gave out `h` for a new object or session (a create, a load, a
// StartAuthSession, a swap back). Something the manager records there is not
// both where it was and new: either it was flushed behind the manager's back
// (a TPM Reset, a Clear) and the record is stale, or the answer is forged and
// names another client's object or session. Neither the holder nor the new
// owner gets the handle: the record is dropped, the handle flushed, and false
// tells the caller to refuse its command. The server's own handles are never
// flushed on an answer's word, nor given to a client; `for_server`: the new
// one is the server's (its records are the wrapper's to keep).
bool ResourceManager::Impl::claim_handle(uint32_t h, bool for_server) {
  if (!for_server && reserved_.count(h)) {
    note(fmt::format("space: an answer named the server's 0x{:08x} as a client's new one: refused", h));
    return false;
  }
  bool taken = sessions_.count(h) > 0;
  if (taken) end_session(h);  // the wrapper's state for it goes too
  if (taken) std::erase(abandoned_, h);
  for (auto& [id, c] : clients_) {
    taken |= std::erase_if(c.objects, [&](const auto& o) { return o.second.loaded == h; }) > 0;
  }
  if (!taken) return true;
  orphans_possible_ = true;
  note(fmt::format("space: an answer named 0x{:08x}, a client's, as a new one: dropped, refused", h));
  (void)flush_context(tpm_, h);
  return false;
}

// A ContextLoad answered with a handle it cannot have loaded (a session's
// context under another handle, an object's as a session): refused, and
// what it names released.
Bytes ResourceManager::Impl::refuse_loaded(ByteView response) {
  release_unexpected(response_handle(response));
  return error_frame(rc::kFailure);
}

}  // namespace tpmsec::server
