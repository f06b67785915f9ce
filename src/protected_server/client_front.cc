#include "protected_server/client_front.h"

#include <fmt/format.h>

#include "tpmsec-server/resource_manager/log_priority.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/tpm.h"

namespace tpmsec::serve {
namespace {

// The space answers a listing of the client's own transient objects or
// sessions (frame_fields.h, asks_own_handles) when no session is on it: the
// answer never crosses the bus, so it needs none, and one on it would make
// the space refuse it (a TPM's listing under an HMAC cannot be filtered).
bool answered_by_space(const CommandAreas& areas) {
  return areas.info->code == cmd::GetCapability::kInfo.code && areas.sessions.empty() &&
         asks_own_handles(areas.parameters);
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
  if (shared_.log) {
    shared_.log(
        fmt::format("{}{}: {}", server::kLogErr, server::describe_peer(space_.client(), space_.peer()), e.message()));
  }
  return error_frame(rc);
}

void ClientFront::forget_ended_sessions() {
  if (!shared_.resources) return;
  for (uint32_t h : shared_.resources->take_ended_sessions()) shared_.wrapper->caller_session_ended(h);
}

void ClientFront::warn_clear(uint32_t code) {
  if (!shared_.log || !warned_.first(code)) return;
  const CommandInfo* info = find_command(code);
  const server::PeerIdentity& peer = space_.peer();
  const std::string program = server::program_of(peer.pid.value_or(0));
  shared_.log(clear_warning(info ? info->name : std::string_view("a command"), code, shared_.wrapper->last_clear(),
                            peer, program.empty() ? "?" : program));
}

Result<Bytes> ClientFront::transmit(ByteView command) {
  // No wrapper: the server is ending, or could not re-establish its
  // session after a fault (it tries again now). A lost session or a reset:
  // the anchor is resolved again first.
  if (shared_.recover && (!shared_.wrapper || shared_.reanchor_due)) {
    shared_.recover(
        runtime_error(shared_.wrapper ? "its session was lost, or the TPM reset" : "no session after the last fault"));
  }
  if (!shared_.wrapper) return error_frame(kResmgrGeneralFailure);
  // What the wrapper keeps under a session's handle belongs to the session
  // the manager tracks under it: a session that ended (another client's,
  // closed since) takes its state along before any frame is read.
  forget_ended_sessions();
  // Admission before anything acts on the frame: a handle or session that
  // is not this client's (handle area, authorization area, a flushed or
  // loaded context; the server's own session among them) is refused here,
  // so no state of the wrapper, kept per session or Name, moves for a frame
  // that names another client's (docs/serve.md, "One client cannot touch
  // another's").
  if (std::optional<uint32_t> refused = space_.refusal(command)) {
    ++shared_.counts->refused;
    return error_frame(*refused);
  }
  auto areas = read_command_areas(command, kMaxCommandBytes);
  if (areas.ok() && answered_by_space(*areas)) return space_.transmit(command);
  // The wrapper's Name cache is keyed by handle, and virtual handles are
  // per client: another client's Names are dropped before this one's
  // command (a read of a Name costs two commands; one client at a time,
  // the usual case, pays nothing).
  if (shared_.named_for != space_.client()) switch_object_names();
  ++shared_.counts->commands;
  shared_.router->route_to(space_.server_view());
  Result<Bytes> answer = shared_.wrapper->exchange(space_, command);
  shared_.router->route_home();
  if (shared_.wrapper->sessions_lost() > shared_.lost_at_anchor) shared_.reanchor_due = true;
  forget_ended_sessions();
  if (answer.ok()) {
    if (areas.ok()) forget_foreign_handle(*areas, *answer);
    if (!shared_.wrapper->last_clear().what.empty()) warn_clear(read_frame_header(command, command.size()).header.code);
    return answer;
  }
  const Error& e = answer.error();
  if (e.reason() == ErrorReason::kSecretInClear) return fault(e, kResmgrNotPermitted);
  if (e.kind() == ErrorKind::kTpm) return error_frame(e.tpm_rc());
  Bytes answer_frame = fault(e, kResmgrGeneralFailure);
  // A frame the wrapper could not use is the client's fault, not the
  // session's: only a fault of the session re-establishes it.
  if (shared_.recover && e.kind() != ErrorKind::kUsage) shared_.recover(e);
  return answer_frame;
}

}  // namespace tpmsec::serve
