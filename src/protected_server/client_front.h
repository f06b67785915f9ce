// One client's front (ServerOptions::client_front): what stands between a
// client's frames and its handle space — the server's one CommandWrapper.
#ifndef TPMSEC_SRC_PROTECTED_SERVER_CLIENT_FRONT_H_
#define TPMSEC_SRC_PROTECTED_SERVER_CLIENT_FRONT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "protected_server/clear_warning.h"
#include "protected_server/routed_transport.h"
#include "tpmsec-server/protected_server/protected_server.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/transport.h"
#include "tpmsec/wrap.h"

namespace tpmsec::serve {

// What every front shares: the one wrapper, the router under its factory.
struct FrontContext {
  CommandWrapper* wrapper = nullptr;
  Tpm* tpm = nullptr;  // the wrapper's (its factory's): its handle ledger
  RoutedTransport* router = nullptr;
  ServeCounts* counts = nullptr;
  // The manager under every client's space: its admission and the sessions
  // it stopped tracking (report_ended_sessions is on).
  server::ResourceManager* resources = nullptr;
  std::function<void(const std::string&)> log;
  // Called after a wrapper fault was answered (the TPM reset under the
  // server, say): the server re-establishes its anchor and session, so the
  // next command works (ProtectedServer).
  std::function<void(const Error&)> recover;
  // The wrapper's sessions_started() and sessions_lost() when the anchor
  // was last resolved. Its session lost since (the TPM reset under the
  // server; an interposer's flush), or a reset the bus saw: the anchor is
  // resolved again (recover) before the next command.
  uint64_t sessions_at_anchor = 0;
  uint64_t lost_at_anchor = 0;
  bool reanchor_due = false;
  // The client whose virtual handles the wrapper's Name cache holds, and
  // the others' Names of their transient objects (ClientFront::switch_object_names).
  server::ClientId named_for = 0;
  std::map<server::ClientId, std::map<uint32_t, Bytes>> object_names;
};

class ClientFront final : public Transport {
 public:
  ClientFront(server::HandleSpace& space, FrontContext& shared) : space_(space), shared_(shared) {}
  ~ClientFront() override;

  // Always a TPM response frame for the client (Result only as the
  // Transport contract asks).
  Result<Bytes> transmit(ByteView command) override;
  std::string describe() const override { return space_.describe(); }
  bool private_handles() const override { return true; }

 private:
  Bytes fault(const Error& e, uint32_t rc);
  void forget_foreign_handle(const CommandAreas& areas, ByteView response);
  void forget_ended_sessions();
  // The wrapper's last command left a secret in clear: told once per code.
  void warn_clear(uint32_t code);
  void switch_object_names();

  server::HandleSpace& space_;
  FrontContext& shared_;
  ClearWarnings warned_;
};

}  // namespace tpmsec::serve

#endif  // TPMSEC_SRC_PROTECTED_SERVER_CLIENT_FRONT_H_
