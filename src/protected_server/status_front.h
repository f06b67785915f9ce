// The status request (tpmsec-server/protected_server/status.h) answered in front of every
// client's front: what serve's status is made of, and the Transport that
// intercepts the request before the client's front and handle space.
#ifndef TPMSEC_SRC_PROTECTED_SERVER_STATUS_FRONT_H_
#define TPMSEC_SRC_PROTECTED_SERVER_STATUS_FRONT_H_

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "tpmsec-server/protected_server/protected_server.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec-server/resource_manager/server.h"
#include "tpmsec/protect.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/transport.h"
#include "tpmsec/wrap.h"

namespace tpmsec::serve {

// What the status answer reads, kept by the ProtectedServer (every pointer
// outlives the fronts; the wrapper and factory may be null while ending).
struct StatusSource {
  ProtectedTpm* tpm = nullptr;
  const SessionFactory* factory = nullptr;
  const CommandWrapper* wrapper = nullptr;
  server::Server* server = nullptr;
  const ServeCounts* counts = nullptr;
  bool strict = false;
  std::string policy;  // the last policy line (open, SIGHUP)
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::map<server::ClientId, std::string> clients;  // describe_peer() of each connected client
  std::set<uint32_t> allowed_uids;                  // root, the server's uid, tss's
};

// The status as JSON (docs/serve.md: `tpmsec serve status --json`).
std::string status_json(const StatusSource& source);
// root, this process's uid, and tss's when the system has that user.
std::set<uint32_t> status_uids();

class StatusFront final : public TransportDecorator {
 public:
  StatusFront(server::HandleSpace& space, std::unique_ptr<Transport> inner, StatusSource& source);
  ~StatusFront() override;

  Result<Bytes> transmit(ByteView command) override;
  // The client's handle space is in front of every TPM command.
  bool private_handles() const override { return true; }

 private:
  server::HandleSpace& space_;
  std::unique_ptr<Transport> inner_;
  StatusSource& source_;
};

}  // namespace tpmsec::serve

#endif  // TPMSEC_SRC_PROTECTED_SERVER_STATUS_FRONT_H_
