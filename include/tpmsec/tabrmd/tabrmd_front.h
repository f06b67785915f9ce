// tpm2-abrmd's D-Bus front end (tabrmd_bus.h) serving a server
// (tpmsec/server/server.h): the bus runs on a thread of its own, so the
// server's loop never waits for the bus daemon and the bus never waits for
// a TPM command. Every CreateConnection hands the server end of its socket
// pair to Server::add_client (thread-safe) with the caller's uid as the bus
// daemon reports it; when the server closes that client (ServerOptions::
// on_closed, call closed()), or refuses it, the connection id is freed on
// the bus. When the bus fails (the daemon went away), the thread ends and
// `on_failure` is called (on that thread): the server should stop, as
// tpm2-abrmd does, and be restarted by its supervisor.
#ifndef TPMSEC_TABRMD_TABRMD_FRONT_H_
#define TPMSEC_TABRMD_TABRMD_FRONT_H_

#include <functional>
#include <memory>

#include "tpmsec/result.h"
#include "tpmsec/server/server.h"
#include "tpmsec/tabrmd/tabrmd_bus.h"

namespace tpmsec::tabrmd {

class TabrmdFront {
 public:
  // Takes the bus name (fails as TabrmdBus::open does) and starts serving.
  // `server` must outlive the front.
  static Result<std::unique_ptr<TabrmdFront>> start(const TabrmdBusOptions& options, server::Server& server,
                                                    server::ClientLimits limits, std::function<void()> on_failure = {});
  ~TabrmdFront();  // stops the bus thread and releases the name
  TabrmdFront(const TabrmdFront&) = delete;
  TabrmdFront& operator=(const TabrmdFront&) = delete;

  // The server closed `client` (from ServerOptions::on_closed; any thread).
  void closed(server::ClientId client);
  // The bus failed (the daemon went away): the message, once the thread ended.
  std::optional<Error> failure() const;

  struct Impl;

 private:
  explicit TabrmdFront(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpmsec::tabrmd

#endif  // TPMSEC_TABRMD_TABRMD_FRONT_H_
