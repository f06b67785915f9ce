#include "tpmsec/server/handle_space.h"

namespace tpmsec::server {

HandleSpace::HandleSpace(ResourceManager& manager, ClientId client, ClientLimits limits, PeerIdentity peer)
    : manager_(manager), client_(client) {
  manager_.open(client_, limits, peer);
}

HandleSpace::~HandleSpace() { manager_.close(client_); }

Result<Bytes> HandleSpace::transmit(ByteView command) { return manager_.execute(client_, command); }

Result<Bytes> HandleSpace::ServerView::transmit(ByteView command) {
  return space_.manager_.execute(space_.client_, command, true);
}

}  // namespace tpmsec::server
