// Admission (handle_space.h, ResourceManager::refusal): whether a client's
// frame names only what the client holds, decided before anything above or
// inside the manager acts on the frame. It reads the manager's state and
// changes none of it, so a refused frame leaves every client as it was.
#include <algorithm>

#include "resource_manager/space_state.h"
#include "resource_manager/tpm_calls.h"
#include "tpmsec/frame_fields.h"

namespace tpmsec::server {

std::optional<uint32_t> ResourceManager::Impl::refusal(ClientId id, ByteView command) const {
  auto found = clients_.find(id);
  if (found == clients_.end()) return rc::kFailure;
  const Client& c = found->second;
  auto areas = read_command_areas(command, c.limits.max_frame_bytes);
  if (areas.ok()) return refusal_of(c, *areas);
  if (areas.error().kind() != ErrorKind::kUnsupported) return rc::kCommandSize;
  // A code the command table does not know names no handle execute() could
  // tell: it reaches the TPM only when the TPM does not implement it either.
  HeaderRead h = read_frame_header(command, c.limits.max_frame_bytes);
  if (h.check != FrameCheck::kOk || implemented_.count(h.header.code)) return rc::kCommandCode;
  return std::nullopt;
}

// The handle area, the authorization area and the handles that ContextLoad
// and FlushContext carry as parameters (the only commands that name a
// handle outside the handle area): each the client's own, or refused with
// the answer execute() would give. A handle the server owns (reserved_:
// the wrapper's session, what it loaded) is never a client's to name.
std::optional<uint32_t> ResourceManager::Impl::refusal_of(const Client& c, const CommandAreas& areas) const {
  for (size_t i = 0; i < areas.handles.size(); ++i) {
    if (!holds(c, areas.handles[i])) return rc_handle_at(i);
  }
  for (size_t j = 0; j < areas.sessions.size(); ++j) {
    const uint32_t h = areas.sessions[j].handle;
    if (ht::is_session(h) && !holds(c, h)) return rc_session_handle_at(j);
  }
  if (areas.info->code == kFlushContext) {
    std::optional<uint32_t> h = read_flush_handle(areas.parameters);
    if (!h) return rc_parameter(rc::kSize, 0);
    if ((is_transient(*h) || ht::is_session(*h)) && !holds(c, *h)) return rc_parameter(rc::kHandle, 0);
  }
  if (areas.info->code == kContextLoad) {
    const uint32_t saved = whole_context_saved_handle(areas.parameters);
    if (saved == 0) return rc_parameter(rc::kSize, 0);
    if (reserved_.count(saved)) return rc_parameter(rc::kHandle, 0);
    auto s = sessions_.find(saved);
    if (s == sessions_.end()) return std::nullopt;  // not one a client saved here: the TPM decides
    const bool its = s->second.owner == c.id && s->second.state == State::kSavedByClient;
    const bool claimable = s->second.state == State::kAbandoned && s->second.uid == c.peer.uid;
    const ByteView given = areas.parameters;
    const Bytes& copy = s->second.client_copy;
    if ((!its && !claimable) || !std::equal(given.begin(), given.end(), copy.begin(), copy.end())) {
      return rc_parameter(rc::kHandle, 0);
    }
  }
  return std::nullopt;
}

// Whether `h`, named by client `c`, is the client's: a transient handle of
// its space, a session it owns; any other kind of handle (PCR, NV,
// persistent, permanent) is the TPM's to judge.
bool ResourceManager::Impl::holds(const Client& c, uint32_t h) const {
  if (reserved_.count(h)) return false;
  if (is_transient(h)) return c.objects.count(h) != 0;
  if (ht::is_session(h)) return owns_session(c.id, h);
  return true;
}

}  // namespace tpmsec::server
