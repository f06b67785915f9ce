#include "tpmsec/serve/protected_server.h"

#include <fmt/format.h>

#include <limits>
#include <utility>

#include "serve/client_front.h"
#include "serve/routed_transport.h"
#include "serve/status_front.h"
#include "tpmsec/null_key.h"
#include "tpmsec/server/handle_space.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/wrap.h"

namespace tpmsec::serve {
namespace {

// The server's own space: what the wrapper does between clients (its
// session's start at open, its flush at the end). Clients' ids count up
// from 1 (server.cc), so this one is never a client's.
constexpr server::ClientId kServerClient = std::numeric_limits<server::ClientId>::max();

// "policy FILE: null key reload, checkpoint every 100": what the status and
// a reload report of the policy in force.
std::string describe_tuning(const std::string& origin, const SessionTuning& t) {
  return fmt::format("policy {}: null key {}, checkpoint every {}", origin, null_key_load_name(t.null_key),
                     t.checkpoint_every);
}

std::string policy_origin(const std::string& path) {
  Result<Policy> p = load_command_policy(path);
  return p.ok() ? p->origin : std::string("(none readable: the defaults)");
}

}  // namespace

class ProtectedServer::Impl {
 public:
  explicit Impl(std::unique_ptr<Transport> bus) : bus_(std::move(bus)) {}
  ~Impl() {
    // The wrapper flushes its session through the server's own space, so
    // the manager (inside the server) must still be there; the clients'
    // fronts, destroyed with the server, then find no wrapper. The server's
    // own space closes before the server that holds its manager.
    front_.wrapper = nullptr;
    status_.wrapper = nullptr;
    status_.factory = nullptr;
    wrapper_.reset();
    factory_.reset();
    protected_.reset();
    quiet_ = true;  // the server's own space is no client: its open and close are not news
    own_.reset();
    server_.reset();
  }

  Status open(ServeRequest request) {
    strict_ = request.strict;
    log_ = request.server.log;
    server::ServerOptions options = std::move(request.server);
    if (options.log) {
      options.log = [this, log = options.log](const std::string& line) {
        if (!quiet_) log(line);
      };
    }
    options.isolate = true;  // the wrapper stands on a space per client
    options.client_front = [this](server::HandleSpace& space) -> Result<std::unique_ptr<Transport>> {
      return std::unique_ptr<Transport>(
          std::make_unique<StatusFront>(space, std::make_unique<ClientFront>(space, *this->front_context()), status_));
    };
    TPMSEC_ASSIGN_OR_RETURN(server_, server::Server::create(*bus_, std::move(options)));
    quiet_ = true;
    own_ = std::make_unique<server::HandleSpace>(server_->resources(), kServerClient, server::ClientLimits{},
                                                 server::PeerIdentity{});
    quiet_ = false;
    auto routed = std::make_unique<RoutedTransport>(*bus_, own_->server_view());
    router_ = routed.get();

    ProtectRequest protect = std::move(request.protect);
    policy_path_ = protect.policy;
    // What earlier runs learnt of this TPM (capabilities, the null key's
    // context) serves this one, as for the CLI and the TCTI. The server
    // owns the TPM while it runs: no other tpmsec process's handles to track.
    protect.keep = true;
    protect.track_handles = false;
    TPMSEC_ASSIGN_OR_RETURN(protected_, ProtectedTpm::open(protect, std::move(routed)));
    TPMSEC_ASSIGN_OR_RETURN(SessionTuning tuning, protected_->session_tuning());
    TPMSEC_ASSIGN_OR_RETURN(factory_, protected_->factory(tuning));
    protected_->keep(factory_.get());
    wrapper_ = std::make_unique<CommandWrapper>(*factory_);
    wrapper_->set_strict(strict_);
    server_->resources().report_ended_sessions(true);
    front_ = FrontContext{wrapper_.get(), &factory_->tpm(), router_, &counts_, &server_->resources(), log_};
    status_ = StatusSource{protected_.get(), factory_.get(), wrapper_.get(), server_.get(), &counts_, strict_};
    status_.policy = describe_tuning(policy_origin(protect.policy), tuning);
    status_.allowed_uids = status_uids();
    tuning_ = tuning;
    return ok_status();
  }

  FrontContext* front_context() { return &front_; }

  std::unique_ptr<Transport> bus_;
  std::unique_ptr<server::Server> server_;
  std::unique_ptr<server::HandleSpace> own_;
  RoutedTransport* router_ = nullptr;  // owned by protected_
  std::unique_ptr<ProtectedTpm> protected_;
  std::unique_ptr<SessionFactory> factory_;
  std::unique_ptr<CommandWrapper> wrapper_;
  FrontContext front_;
  StatusSource status_;
  SessionTuning tuning_;
  ServeCounts counts_;
  std::string policy_path_;  // the request's (empty: $TPMSEC_POLICY, else the shipped one)
  bool strict_ = false;
  bool quiet_ = false;  // the log says nothing of the server's own space
  std::function<void(const std::string&)> log_;
};

Result<std::unique_ptr<ProtectedServer>> ProtectedServer::open(ServeRequest request) {
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> bus, open_bus_transport(request.protect.tpm));
  return open(std::move(request), std::move(bus));
}

Result<std::unique_ptr<ProtectedServer>> ProtectedServer::open(ServeRequest request, std::unique_ptr<Transport> tpm) {
  auto impl = std::make_unique<Impl>(std::move(tpm));
  TPMSEC_RETURN_IF_ERROR(impl->open(std::move(request)));
  return std::unique_ptr<ProtectedServer>(new ProtectedServer(std::move(impl)));
}

ProtectedServer::ProtectedServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProtectedServer::~ProtectedServer() = default;

server::Server& ProtectedServer::server() { return *impl_->server_; }
ProtectedTpm& ProtectedServer::protected_tpm() { return *impl_->protected_; }

ServeCounts ProtectedServer::counts() const {
  ServeCounts c = impl_->counts_;
  c.sessions_started = impl_->wrapper_ ? impl_->wrapper_->sessions_started() : 0;
  return c;
}

Result<std::string> ProtectedServer::reload() {
  // A policy that does not parse is refused here, the running one kept.
  TPMSEC_ASSIGN_OR_RETURN(Policy policy, load_command_policy(impl_->policy_path_));
  TPMSEC_ASSIGN_OR_RETURN(SessionTuning tuning, impl_->protected_->session_tuning());
  std::string line = describe_tuning(policy.origin, tuning);
  impl_->status_.policy = line;
  const bool same =
      tuning.null_key == impl_->tuning_.null_key && tuning.checkpoint_every == impl_->tuning_.checkpoint_every;
  return line + (same ? " (as running)" : " (the running session keeps its own until the server restarts)");
}

std::string ProtectedServer::counts_report() const {
  return impl_->wrapper_ ? impl_->wrapper_->counts_report() : std::string();
}

}  // namespace tpmsec::serve
