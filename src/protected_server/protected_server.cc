#include "tpmsec-server/protected_server/protected_server.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "protected_server/client_front.h"
#include "protected_server/routed_transport.h"
#include "protected_server/status_front.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec/command_table.h"
#include "tpmsec/commands.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/host/data_dir.h"
#include "tpmsec/null_key.h"
#include "tpmsec/provision.h"
#include "tpmsec/response_code.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/tpm.h"
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

// The TPM's resetCount, none when it does not answer it.
std::optional<uint32_t> read_reset_count(Transport& bus) {
  Tpm tpm(bus);
  auto r = tpm.run(cmd::ReadClock{});
  if (!r.ok()) return std::nullopt;
  return r->reset_count;
}

// The platform's part for a TPM with no firmware before it (swtpm, mssim
// after a power cycle; the kernel does it for a device): a TPM that answers
// TPM_RC_INITIALIZE was reset and not started again, so the server sends
// TPM2_Startup(CLEAR) as firmware would. The command in flight gets the
// TPM's answer; the server's session went with the reset and the wrapper
// starts another for the next command; every client's objects and sessions
// went too, and `reset` (the resource manager's tpm_was_reset) forgets them.
class StartingBus final : public TransportDecorator {
 public:
  StartingBus(std::unique_ptr<Transport> bus, std::function<void(const std::string&)>* log,
              std::function<void()>* reset)
      : TransportDecorator(*bus, Traffic::kObserves), bus_(std::move(bus)), log_(log), reset_(reset) {}
  Result<Bytes> transmit(ByteView command) override {
    TPMSEC_ASSIGN_OR_RETURN(Bytes response, bus_->transmit(command));
    HeaderRead answer = read_frame_header(response, response.size());
    if (answer.check == FrameCheck::kIncomplete || answer.header.code != rc::kInitialize) return response;
    // A client's own TPM2_Startup (systemd sends one) is answered
    // TPM_RC_INITIALIZE by a TPM that is started: no reset.
    HeaderRead sent = read_frame_header(command, command.size());
    if (sent.check != FrameCheck::kIncomplete && sent.header.code == cc::kStartup) return response;
    if (*reset_) (*reset_)();  // started or not, what the TPM held is gone
    Tpm tpm(*bus_);
    auto started = tpm.run(cmd::Startup{su::kClear});
    if (*log_) {
      (*log_)(started.ok()
                  ? "the TPM was reset and not started: sent TPM2_Startup(CLEAR); the command in flight "
                    "was answered TPM_RC_INITIALIZE"
                  : "the TPM was reset and not started; TPM2_Startup(CLEAR) failed: " + started.error().message());
    }
    return response;
  }
  Status reset_tpm() override { return bus_->reset_tpm(); }
  Status suspend_resume() override { return bus_->suspend_resume(); }

 private:
  std::unique_ptr<Transport> bus_;
  std::function<void(const std::string&)>* log_;
  std::function<void()>* reset_;
};

}  // namespace

class ProtectedServer::Impl {
 public:
  explicit Impl(std::unique_ptr<Transport> bus)
      : bus_(std::make_unique<StartingBus>(std::move(bus), &log_, &tpm_reset_)) {}
  ~Impl() {
    front_.recover = nullptr;  // ending: nothing to re-establish
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
    tpm_reset_ = nullptr;  // the manager goes with the server
    quiet_ = true;         // the server's own space is no client: its open and close are not news
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
    tpm_reset_ = [this] {
      server_->resources().tpm_was_reset();
      reset_told_ = true;
      front_.reanchor_due = true;  // resolved again before the next command
    };
    reset_count_ = read_reset_count(*bus_);
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
    // A server must start with no configuration and keep its anchor across
    // reboots: with no anchor named, the standing order (protect.h).
    if (!protect.standing) protect.standing = StandingAnchor{data_dir() + "/ek-roots", "", kDefaultSaltKeyHandle};
    TPMSEC_ASSIGN_OR_RETURN(protected_, ProtectedTpm::open(protect, std::move(routed)));
    front_ = FrontContext{nullptr, nullptr, router_, &counts_, &server_->resources(), log_};
    server_->resources().report_ended_sessions(true);
    TPMSEC_RETURN_IF_ERROR(start_session());
    front_.recover = [this](const Error& why) { recover(why); };
    return ok_status();
  }

  // The factory and the wrapper on the resolved anchor: the server's session.
  Status start_session() {
    TPMSEC_ASSIGN_OR_RETURN(ProtectedTpm::Sessions sessions, protected_->open_sessions());
    std::unique_ptr<SessionFactory>& factory = sessions.factory;
    const SessionTuning& tuning = sessions.tuning;
    if (wrapper_) {
      // Re-anchored (recover()): the same wrapper on the new factory, so what
      // it keeps of every client's sessions (to re-sign and encrypt under
      // them) and of Names stays; only its own session is new.
      wrapper_->use_factory(*factory);
    } else {
      wrapper_ = std::make_unique<CommandWrapper>(*factory);
      wrapper_->set_strict(strict_);
    }
    factory_ = std::move(factory);  // the old one goes once the wrapper let go of it
    front_.wrapper = wrapper_.get();
    front_.tpm = &factory_->tpm();
    // named_for stays: the wrapper (and the Names it holds for that client) is the same.
    front_.resources = &server_->resources();
    // Field by field: the clients it lists and its uptime outlive a re-anchoring.
    status_.tpm = protected_.get();
    status_.factory = factory_.get();
    status_.wrapper = wrapper_.get();
    status_.server = server_.get();
    status_.counts = &counts_;
    status_.strict = strict_;
    status_.policy = describe_tuning(policy_origin(policy_path_), tuning);
    status_.allowed_uids = status_uids();
    tuning_ = tuning;
    front_.sessions_at_anchor = wrapper_->sessions_started();
    front_.lost_at_anchor = wrapper_->sessions_lost();
    front_.reanchor_due = false;
    return ok_status();
  }

  // A wrapper fault (the TPM reset under the server: its session and null
  // key gone, the kernel's null_name changed), or its session lost: the
  // command in flight was answered; the anchor is resolved afresh (null_name
  // read again, a pinned salt key checked again, the EK verified again) and
  // a new session started, so the next command works. A failure leaves no
  // wrapper: the next command tries again rather than the server answering
  // the same error forever.
  void recover(const Error& why) {
    if (log_)
      log_(fmt::format("the server's session failed ({}): re-establishing its anchor and session", why.message()));
    // Until it is re-established no client command goes out: the front
    // asks again at the next one. The wrapper itself stays (start_session).
    front_.wrapper = nullptr;
    // A reset the bus did not see (the TPM started by someone else, as
    // firmware or a kernel does) is told by the TPM's resetCount, read at
    // open and here. A restart or resume (restartCount) is left alone: what
    // it keeps is not the server's to judge, and a resume keeps sessions.
    const std::optional<uint32_t> now = read_reset_count(*bus_);
    const bool unseen = now && reset_count_ && *now != *reset_count_ && !reset_told_;
    retire_own_handles(unseen || reset_told_);
    if (unseen) {
      if (log_) log_(fmt::format("the TPM was reset under the server (resetCount {} -> {})", *reset_count_, *now));
      server_->resources().tpm_was_reset();  // every client's objects and sessions went too
    }
    if (now) reset_count_ = now;
    reset_told_ = false;
    Status st = protected_->reanchor();
    if (st.ok()) st = start_session();
    if (!log_) return;
    log_(st.ok() ? "re-established: anchor: " + protected_->anchor_description()
                 : "not re-established, tried again at the next command: " + st.error().message());
  }

  // What the server made before, only what still exists in this TPM epoch
  // flushed: a session started since the anchor was resolved replaced one
  // the TPM lost, so it is of this epoch (flushed while the manager, not yet
  // told of an unseen reset, holds it as the server's); any other handle a
  // reset took is forgotten, never flushed, for the TPM may have given its
  // number to a new session or key (the new factory's among them).
  void retire_own_handles(bool reset) {
    const bool replaced = wrapper_->sessions_started() > front_.sessions_at_anchor + 1;
    wrapper_->use_factory(*factory_, /*session_may_exist=*/replaced || !reset);
    if (reset) factory_->tpm_was_reset();
  }

  // The one start-up line: which TPM, which anchor and what it rests on,
  // which session, which policy rule.
  std::string startup_line() {
    std::string session = "none";
    if (factory_) {
      const SessionFactory& f = *factory_;
      const std::string kind = f.config().salt == SaltKind::kRsa ? "RSA-2048" : "ECC P-256";
      if (f.bound()) {
        session = "bound to the bind secret";
      } else if (const PersistentSaltKey* k = f.salt_key()) {
        session = fmt::format("salted to the persistent key 0x{:08x} ({})", k->handle, kind);
      } else if (f.ek_key()) {
        session = fmt::format("salted to the endorsement key ({})", kind);
      } else if (f.null_key()) {
        session = fmt::format("salted to the null key ({})", kind);
      } else {
        session = "unsalted";
      }
      session += ", HMAC-SHA256 with audit, AES-128-CFB parameter encryption";
      if (strict_) session += ", strict";
    }
    return fmt::format("TPM {}; anchor: {}; session: {}; {}", protected_->transport().describe(),
                       protected_->anchor_description(), session, protected_->policy_rule());
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
  std::function<void()> tpm_reset_;      // StartingBus saw a reset: the manager forgets what it destroyed
  std::optional<uint32_t> reset_count_;  // the TPM's, as last read (recover)
  bool reset_told_ = false;              // the manager was told of a reset since it was read
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

std::string ProtectedServer::startup_line() const { return impl_->startup_line(); }

Result<std::string> forget_state(ProtectRequest request) {
  request.anchor = anchor::Automatic{};
  request.standing.reset();
  request.keep = false;
  request.track_handles = false;
  request.use_provisioned = true;
  request.host = host_state_of(request);
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<ProtectedTpm> tpm, ProtectedTpm::open(request));
  std::vector<std::string> said;
  TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> key, request.host->salt_key(tpm->id()));
  if (key) {
    TPMSEC_ASSIGN_OR_RETURN(RemovedSaltKey removed, unprovision_salt_key(*tpm));
    const uint32_t h = removed.key.handle;
    said.push_back(removed.evicted       ? fmt::format("evicted the salt key tpmsec made at 0x{:08x}", h)
                   : removed.key.created ? fmt::format("the salt key tpmsec made at 0x{:08x} was already gone", h)
                                         : fmt::format("forgot the salt key adopted at 0x{:08x}; it stays in the TPM "
                                                       "(tpmsec did not make it)",
                                                       h));
  }
  TPMSEC_ASSIGN_OR_RETURN(ForgottenPins pins, forget_pins(tpm->id(), request.host));
  if (pins.ek_pin) said.push_back("forgot the EK pin");
  if (pins.tofu_pin) said.push_back("forgot the null key's first-use pin");
  if (said.empty()) said.push_back("nothing was pinned");
  return fmt::format("{}: {}", pins.tpm, fmt::join(said, "; "));
}

std::string ProtectedServer::counts_report() const {
  return impl_->wrapper_ ? impl_->wrapper_->counts_report() : std::string();
}

}  // namespace tpmsec::serve
