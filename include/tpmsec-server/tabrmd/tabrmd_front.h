// tpm2-abrmd's D-Bus front end (tabrmd_bus.h) serving a Server: a source of
// the server's own loop (Server::add_source(), which owns it; no thread of
// its own). Every CreateConnection hands the server end of its socket pair
// to Server::connect() with the caller's uid and pid as the bus daemon
// reports them; when the server closes or refuses that client, its
// connection id is freed on the bus. SetLocality: 0 only (a TPM device takes
// no other from user space), anything else NotImplemented as tpm2-abrmd 3.0
// answers. When the bus fails (its daemon went away), process() fails and
// so the server's run(): the server stops, as tpm2-abrmd does, and its
// supervisor restarts it.
#ifndef TPMSEC_SERVER_TABRMD_TABRMD_FRONT_H_
#define TPMSEC_SERVER_TABRMD_TABRMD_FRONT_H_

#include <memory>

#include "tpmsec-server/resource_manager/client_connection.h"
#include "tpmsec-server/resource_manager/poll_source.h"
#include "tpmsec-server/resource_manager/server.h"
#include "tpmsec-server/tabrmd/tabrmd_bus.h"
#include "tpmsec/result.h"

namespace tpmsec::tabrmd {

class TabrmdFront final : public server::PollSource {
 public:
  // Takes the bus name (fails as TabrmdBus::open does). `server` must
  // outlive the front (it does when the server owns it: add_source()).
  static Result<std::unique_ptr<TabrmdFront>> open(const TabrmdBusOptions& options, server::Server& server,
                                                   server::ClientLimits limits = {});

  int fd() const override { return bus_->fd(); }
  short events() const override { return bus_->events(); }
  int timeout_ms() const override { return bus_->timeout_ms(); }
  Status process() override;

 private:
  TabrmdFront(server::Server& server, server::ClientLimits limits) : server_(server), limits_(limits) {}
  void connection(OwnedFd fd, uint64_t id, const BusPeer& peer);

  server::Server& server_;
  server::ClientLimits limits_;
  std::unique_ptr<TabrmdBus> bus_;
};

}  // namespace tpmsec::tabrmd

#endif  // TPMSEC_SERVER_TABRMD_TABRMD_FRONT_H_
