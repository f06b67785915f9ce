#include "serve/client_front.h"

#include <fmt/format.h>

#include "tpmsec/command_frame.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/tpm.h"

namespace tpmsec::serve {
namespace {

// The space answers a listing of transient objects or sessions from the
// client's own handles (handle_space.h) when no session is on it: the answer
// never crosses the bus, so it needs no session, and one on it would make
// the space refuse it (a TPM's listing under an HMAC cannot be filtered).
bool answered_by_space(const CommandAreas& areas) {
  if (areas.info->code != cmd::GetCapability::kInfo.code || !areas.sessions.empty()) return false;
  if (areas.parameters.size() < 8) return false;
  const uint32_t capability = load_be32(areas.parameters.data());
  const uint32_t property = load_be32(areas.parameters.data() + 4);
  const uint8_t type = static_cast<uint8_t>(property >> 24);
  return capability == cap::kHandles &&
         (type == ht::kTransient || type == ht::kHmacSession || type == ht::kPolicySession);
}

}  // namespace

ClientFront::~ClientFront() {
  // Its virtual handles may be another client's next: their Names go.
  if (shared_.wrapper && shared_.named_for == space_.client()) {
    shared_.wrapper->forget_object_names();
    shared_.named_for = 0;
  }
  shared_.object_names.erase(space_.client());
}

void ClientFront::forget_foreign_handle(const CommandAreas& areas, ByteView response) {
  // The wrapper notes a handle a caller's command created as another's
  // (HandleLedger::add_foreign), so that its own ContextLoad or
  // StartAuthSession is never answered with it. Here that handle is this
  // client's virtual one, a number of its space alone: the next client's
  // space, or the server view the wrapper's own commands go through, gives
  // out the same numbers for other objects, and the mark would refuse the
  // wrapper's next salt key load ("already in use") for the server's life.
  // Nothing a space answers with comes from the bus, so the mark guards
  // nothing here: it goes once the command is answered.
  if (areas.info->response_handle_count != 1 || !succeeded(response) || !shared_.tpm) return;
  auto handles = read_response_handles(response, 1, kMaxCommandBytes);
  if (handles.ok() && !handles->empty()) shared_.tpm->foreign_flushed(handles->front());
}

// The wrapper's Names of transient objects are this client's from now on:
// the last client's kept aside, this one's put back. A Name its session
// authenticated stays its virtual handle's (an object's Name never changes),
// so an object swapped for another on the bus while the manager had it saved
// is refused by the TPM (cpHash), never read again and taken for its own.
void ClientFront::switch_object_names() {
  if (shared_.named_for != 0) shared_.object_names[shared_.named_for] = shared_.wrapper->take_object_names();
  auto mine = shared_.object_names.extract(space_.client());
  shared_.wrapper->put_object_names(mine.empty() ? std::map<uint32_t, Bytes>() : std::move(mine.mapped()));
  shared_.named_for = space_.client();
}

Bytes ClientFront::fault(const Error& e, uint32_t rc) {
  ++shared_.counts->faults;
  if (shared_.log) shared_.log(fmt::format("client {}: {}", space_.client(), e.message()));
  return error_frame(rc);
}

Result<Bytes> ClientFront::transmit(ByteView command) {
  if (!shared_.wrapper) return error_frame(kResmgrGeneralFailure);  // the server is ending
  auto areas = read_command_areas(command, kMaxCommandBytes);
  if (areas.ok()) {
    if (answered_by_space(*areas)) return space_.transmit(command);
    // The server's session is on every client's command, put there by the
    // wrapper: a client that names it itself is refused, as the space
    // refuses any handle that is not the client's.
    const uint32_t ours = shared_.wrapper->session_handle();
    for (size_t j = 0; ours != 0 && j < areas->sessions.size(); ++j) {
      if (areas->sessions[j].handle == ours) return error_frame(rc_session_handle_at(j));
    }
  }
  // The wrapper's Name cache is keyed by handle, and virtual handles are
  // per client: another client's Names are dropped before this one's
  // command (a read of a Name costs two commands; one client at a time,
  // the usual case, pays nothing).
  if (shared_.named_for != space_.client()) switch_object_names();
  ++shared_.counts->commands;
  shared_.router->route_to(space_.server_view());
  Result<Bytes> answer = shared_.wrapper->exchange(space_, command);
  shared_.router->route_home();
  if (answer.ok()) {
    if (areas.ok()) forget_foreign_handle(*areas, *answer);
    return answer;
  }
  const Error& e = answer.error();
  if (e.reason() == ErrorReason::kSecretInClear) return fault(e, kResmgrNotPermitted);
  if (e.kind() == ErrorKind::kTpm) return error_frame(e.tpm_rc());
  return fault(e, kResmgrGeneralFailure);
}

}  // namespace tpmsec::serve
