// The transport under the server's one SessionFactory: the wrapper's own
// commands (its session's start, audited name reads, its flush) go to the
// space of the client whose command is being served — its server view,
// which translates that client's virtual handles and makes what the
// wrapper creates the server's — and to the server's own space between
// clients. The TPM's identity (describe(), what outlives the process) is
// the bus's: the protect path keys pins and kept state by it.
#ifndef TPMSEC_SRC_PROTECTED_SERVER_ROUTED_TRANSPORT_H_
#define TPMSEC_SRC_PROTECTED_SERVER_ROUTED_TRANSPORT_H_

#include <string>

#include "tpmsec/transport.h"

namespace tpmsec::serve {

class RoutedTransport final : public TransportDecorator {
 public:
  // The TPM is the bus's; its commands are routed (in process as the bus is:
  // the spaces they pass alter no answer of the TPM's).
  RoutedTransport(Transport& bus, Transport& own) : TransportDecorator(bus, Traffic::kObserves), own_(own), to_(&own) {}

  Result<Bytes> transmit(ByteView command) override { return to_->transmit(command); }
  // Every command goes through a handle space: the server is this TPM's
  // resource manager, so the handle ledger takes no baseline and sweeps
  // nothing (handle_ledger.h).
  bool private_handles() const override { return true; }

  // For the duration of one client command.
  void route_to(Transport& client_view) { to_ = &client_view; }
  void route_home() { to_ = &own_; }

 private:
  Transport& own_;
  Transport* to_;
};

}  // namespace tpmsec::serve

#endif  // TPMSEC_SRC_PROTECTED_SERVER_ROUTED_TRANSPORT_H_
