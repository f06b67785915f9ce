// tpm2-abrmd's D-Bus front end as a source of the server's loop
// (tpmsec-server/tabrmd/tabrmd_front.h).
#include "tpmsec-server/tabrmd/tabrmd_front.h"

#include <utility>

namespace tpmsec::tabrmd {

Result<std::unique_ptr<TabrmdFront>> TabrmdFront::open(const TabrmdBusOptions& options, server::Server& server,
                                                       server::ClientLimits limits) {
  std::unique_ptr<TabrmdFront> front(new TabrmdFront(server, limits));
  TabrmdFront* self = front.get();
  TabrmdCallbacks callbacks;
  callbacks.on_connection = [self](OwnedFd fd, uint64_t id, const BusPeer& peer) {
    self->connection(std::move(fd), id, peer);
  };
  // Every command goes to the TPM at locality 0 (a TPM device takes no other
  // from user space): any other is NotImplemented, as tpm2-abrmd 3.0 answers.
  callbacks.on_set_locality = [](uint64_t, uint8_t locality) { return locality == 0 ? 0u : kResmgrRcNotImplemented; };
  TPMSEC_ASSIGN_OR_RETURN(front->bus_, TabrmdBus::open(options, std::move(callbacks)));
  return front;
}

// On the loop's thread (process()): the client is the server's once
// connect() took it; its id is freed on the bus when the server closes it.
void TabrmdFront::connection(OwnedFd fd, uint64_t id, const BusPeer& peer) {
  server::ClientConnection c;
  c.socket = std::move(fd);
  if (peer.uid != static_cast<uid_t>(-1)) c.peer.uid = static_cast<uint32_t>(peer.uid);
  if (peer.pid > 0) c.peer.pid = static_cast<uint32_t>(peer.pid);
  c.limits = limits_;
  c.front = "D-Bus";
  c.on_closed = [this, id] { bus_->connection_closed(id); };
  if (!server_.connect(std::move(c)).ok()) bus_->connection_closed(id);
}

Status TabrmdFront::process() {
  Status st = bus_->process();
  if (!st.ok()) return runtime_error("the D-Bus front end failed: " + st.error().message());
  return ok_status();
}

}  // namespace tpmsec::tabrmd
