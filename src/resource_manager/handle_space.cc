#include "tpmsec-server/resource_manager/handle_space.h"

namespace tpmsec::server {

HandleSpace::HandleSpace(ResourceManager& manager, ClientId client, ClientLimits limits, PeerIdentity peer)
    : manager_(manager), client_(client), peer_(peer) {
  manager_.open(client_, limits, peer);
}

HandleSpace::~HandleSpace() { manager_.close(client_); }

// A lost answer is an error, not the TPM_RC_FAILURE frame a raw client gets:
// a wrapper above this space must know the command may have run
// (CommandWrapper::response_lost), or its session's nonces go astray.
Result<Bytes> HandleSpace::transmit(ByteView command) {
  Bytes answer = manager_.execute(client_, command);
  if (manager_.answer_lost()) return runtime_error("the TPM's answer was lost (its transport failed)");
  return answer;
}

Result<Bytes> HandleSpace::ServerView::transmit(ByteView command) {
  Bytes answer = space_.manager_.execute(space_.client_, command, true);
  if (space_.manager_.answer_lost()) return runtime_error("the TPM's answer was lost (its transport failed)");
  return answer;
}

}  // namespace tpmsec::server
