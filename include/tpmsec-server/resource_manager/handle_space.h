// One client's handle space: a Transport whose transmit() runs a command in
// that client's space of the resource manager (resource_manager.h), so a
// per-client CommandWrapper can sit above it (client frames -> wrapper ->
// space -> TPM). Closes the client when destroyed. Same rules as the
// manager: not thread-safe; only the server layer and what composes it see
// this header (scripts/check-includes).
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_HANDLE_SPACE_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_HANDLE_SPACE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "tpmsec-server/resource_manager/client.h"
#include "tpmsec-server/resource_manager/resource_manager.h"
#include "tpmsec/bytes.h"
#include "tpmsec/result.h"
#include "tpmsec/transport.h"

namespace tpmsec::server {

class HandleSpace final : public Transport {
 public:
  HandleSpace(ResourceManager& manager, ClientId client, ClientLimits limits, PeerIdentity peer);
  ~HandleSpace() override;

  Result<Bytes> transmit(ByteView command) override;
  // ResourceManager::refusal for this client.
  std::optional<uint32_t> refusal(ByteView command) const { return manager_.refusal(client_, command); }
  std::string describe() const override { return "space"; }
  bool private_handles() const override { return true; }
  // The same space for the server's own commands on this client's behalf:
  // what they create is reserve()d, not the client's.
  Transport& server_view() { return server_view_; }
  ClientId client() const { return client_; }
  const PeerIdentity& peer() const { return peer_; }

 private:
  class ServerView final : public Transport {
   public:
    explicit ServerView(HandleSpace& space) : space_(space) {}
    Result<Bytes> transmit(ByteView command) override;
    std::string describe() const override { return "space (server)"; }
    bool private_handles() const override { return true; }

   private:
    HandleSpace& space_;
  };
  ResourceManager& manager_;
  ClientId client_;
  PeerIdentity peer_;
  ServerView server_view_{*this};
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_HANDLE_SPACE_H_
