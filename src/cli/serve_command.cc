// tpmsec serve: one process owns the TPM and serves every program on the
// machine through tpm2-abrmd's D-Bus interface (com.intel.tss2.Tabrmd) and a
// Unix socket with /dev/tpmrm0's semantics, with tpmsec's one protected
// session on every client command (tpmsec-server/protected_server/protected_server.h). This
// file only parses the options, composes the library's parts and prints.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"
#include "serve_daemon.h"
#include "strategy_option.h"
#include "tpmsec-server/protected_server/protected_server.h"
#include "tpmsec-server/resource_manager/log_priority.h"
#include "tpmsec-server/socket_front/socket_front.h"
#include "tpmsec-server/tabrmd/tabrmd_front.h"
#include "tpmsec/host/data_dir.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec::cli {
namespace {

struct ServeOptions {
  TpmOption tpm;
  ProtectionOptions protection;
  std::string policy;
  bool strict = false;
  std::string dbus = "system";
  std::string dbus_address;
  std::string socket;
  std::string socket_group;
  size_t max_clients = server::ServerOptions{}.max_clients;
  size_t max_connections = server::ServerOptions{}.max_clients_per_uid;
  size_t max_sessions = server::UidLimits{}.max_sessions;
  size_t max_objects = server::UidLimits{}.max_objects;
  bool verbose = false;
  bool allow_root = false;
  std::string ek_roots;
  std::string ek_intermediates;
  bool forget_state = false;
};

// The listening socket systemd passed (tpmsec.socket; sd_listen_fds(3)'s
// protocol: LISTEN_PID is this process, LISTEN_FDS 1, the descriptor 3).
int activation_socket() {
  const char* pid = ::getenv("LISTEN_PID");
  const char* count = ::getenv("LISTEN_FDS");
  if (!pid || !count || std::string(pid) != std::to_string(::getpid()) || std::string(count) != "1") return -1;
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  return 3;
}

// SIGTERM and SIGINT end the server, SIGHUP asks for a reload (taken on the
// loop's thread: reload_requested()): blocked in every thread (before any
// starts) and taken by one that waits for them. A SIGHUP never ends serve.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGHUP);
    sigaddset(&set_, SIGUSR1);  // our own wake-up at the end
    ::pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    waiter_ = std::thread([this] {
      int sig = 0;
      while (::sigwait(&set_, &sig) == 0 && !done_) {
        if (sig == SIGHUP) reload_ = true;
        if (sig == SIGTERM || sig == SIGINT) break;
      }
      stop_ = true;
    });
  }
  ~StopSignals() {
    done_ = true;
    ::pthread_kill(waiter_.native_handle(), SIGUSR1);
    waiter_.join();
  }
  const std::atomic<bool>& stop() const { return stop_; }
  // True once per SIGHUP (several before a turn of the loop are one).
  bool reload_requested() { return reload_.exchange(false); }

 private:
  sigset_t set_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reload_{false};
  std::atomic<bool> done_{false};
  std::thread waiter_;
};

// The emulated chip (--emulate) the server is handed: the measured
// transport, which the command owns, keeps alive and reports on when the
// server ends (its last commands, the session's flush, counted).
class EmulatedBus final : public TransportDecorator {
 public:
  explicit EmulatedBus(MeasuredTransport& measured) : TransportDecorator(measured, Traffic::kObserves) {}
  Result<Bytes> transmit(ByteView command) override { return inner().transmit(command); }
  // The measured stack is the server's own: nothing keeps handles apart in it.
  bool private_handles() const override { return false; }
};

void report_emulated(const MeasuredTransport& m) {
  int64_t ns = 0;
  for (const TraceRecord& r : m.log().records()) ns += r.duration_ns;
  fmt::print(stderr, "tpmsec: emulated {}: {} TPM commands took {:.2f} ms on the virtual clock\n", m.profile(),
             m.log().size(), static_cast<double>(ns) / 1e6);
}

// Every TPM, the in-process one (tests, demos) as any other, opened one way
// (open_transport()) and served by the library; with --emulate behind the
// profile's latency model (MeasuredTransport), which `emulated` keeps.
Result<std::unique_ptr<serve::ProtectedServer>> open_server(const ServeOptions& o, serve::ServeRequest request,
                                                            std::unique_ptr<MeasuredTransport>& emulated) {
  const Result<ResolvedTpm>& tpm = o.tpm.resolved();
  if (!tpm.ok()) return tpm.error();
  request.protect.tpm = tpm->tpm;
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> opened, open_transport(tpm->spec));
  if (o.tpm.emulate.empty()) return serve::ProtectedServer::open(std::move(request), std::move(opened));
  TPMSEC_ASSIGN_OR_RETURN(emulated, MeasuredTransport::open(std::move(opened), o.tpm.emulate));
  if (!emulated->warning().empty()) fmt::print(stderr, "tpmsec: warning: {}\n", emulated->warning());
  return serve::ProtectedServer::open(std::move(request), std::make_unique<EmulatedBus>(*emulated));
}

// The front ends, each a source of the server's loop: the socket
// (systemd's, or --socket) and the D-Bus name. A description of them for
// the start-up line.
Result<std::string> serve_fronts(const ServeOptions& o, int activated, server::Server& server) {
  if (activated >= 0) {
    TPMSEC_RETURN_IF_ERROR(socket_front::listen_fd(server, UniqueFd(activated), "the socket systemd passed"));
  } else if (!o.socket.empty()) {
    socket_front::UnixSocketOptions socket;
    socket.group = o.socket_group;
    TPMSEC_RETURN_IF_ERROR(socket_front::listen_unix(server, o.socket, socket));
  }
  if (o.dbus != "none") {
    tabrmd::TabrmdBusOptions bus;
    bus.bus = o.dbus == "session" ? tabrmd::TabrmdBusOptions::Bus::kSession : tabrmd::TabrmdBusOptions::Bus::kSystem;
    bus.address = o.dbus_address;
    // The server decides who gets in (it may close an idle connection for a
    // newcomer): the bus only bounds what it hands over.
    bus.max_connections = 2 * o.max_clients;
    // A bus failure ends the server's run() (exit 1): its supervisor restarts it.
    TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<tabrmd::TabrmdFront> front, tabrmd::TabrmdFront::open(bus, server));
    server.add_source(std::move(front));
  }
  return fmt::format("{}{}",
                     o.dbus != "none" ? fmt::format(", D-Bus {} bus as {}", o.dbus, tabrmd::kTabrmdBusName) : "",
                     activated >= 0     ? ", the socket systemd passed"
                     : o.socket.empty() ? ""
                                        : ", socket " + o.socket);
}

// What the loop does every turn (ServerOptions::tick): the watchdog's ping,
// a STATUS= line for `systemctl status` now and then, and the reload a
// SIGHUP asked for.
void on_tick(StopSignals& signals, ServiceNotifier& notifier, const DaemonLog& log,
             serve::ProtectedServer* const* served) {
  notifier.tick();
  if (!*served) return;
  if (notifier.status_due()) {
    const serve::ServeCounts c = (*served)->counts();
    notifier.notify(
        fmt::format("STATUS=serving: {} client(s) connected, {} client commands, {} resource-manager errors",
                    (*served)->server().stats().clients, c.commands, c.faults));
  }
  if (!signals.reload_requested()) return;
  notifier.notify("RELOADING=1\nSTATUS=reloading the policy");
  Result<std::string> reloaded = (*served)->reload();
  if (reloaded.ok()) {
    log.line(server::kLogInfo, "SIGHUP: " + *reloaded + "; command-line options are kept (restart to change them)");
  } else {
    log.line(server::kLogErr,
             "SIGHUP: the policy was not reloaded, the running one stays: " + reloaded.error().message());
  }
  notifier.notify("READY=1\nSTATUS=serving");
}

// --forget-state: what serve pinned goes (a package's purge), nothing served.
Status run_forget_state(const ServeOptions& o) {
  TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o.protection.request());
  TPMSEC_ASSIGN_OR_RETURN(request.tpm, o.tpm.tpm_string());
  TPMSEC_ASSIGN_OR_RETURN(std::string done, serve::forget_state(std::move(request)));
  fmt::print("{}\n", done);
  return ok_status();
}

Status run_serve(const ServeOptions& o) {
  // A package's purge runs it as root, before anything is served.
  if (o.forget_state) return run_forget_state(o);
  StopSignals signals;  // first: a SIGHUP from here on never ends serve
  // tpm2-abrmd's rule: a TPM server has no business running as root (the
  // unit runs it as tss).
  if (::geteuid() == 0 && !o.allow_root) {
    return usage_error("refusing to run as root: run serve as the TPM's user (tss), or give --allow-root");
  }
  const int activated = activation_socket();
  if (o.dbus == "none" && o.socket.empty() && activated < 0) {
    return usage_error("nothing to serve: give --dbus system|session or --socket PATH");
  }
  DaemonLog log;
  ServiceNotifier notifier;
  notifier.notify("STATUS=opening the TPM and starting its session");
  serve::ServeRequest request;
  TPMSEC_ASSIGN_OR_RETURN(request.protect, o.protection.request());
  TPMSEC_RETURN_IF_ERROR(apply_policy_option(o.policy, o.protection.items_origin(), request.protect));
  request.protect.verbose = o.verbose;
  request.protect.notice = [&log](std::string_view line) { log.line("<5>", line); };
  if (!o.ek_roots.empty() || !o.ek_intermediates.empty()) {
    request.protect.standing = StandingAnchor{o.ek_roots, o.ek_intermediates, kDefaultSaltKeyHandle};
    if (o.ek_roots.empty()) request.protect.standing->ek_roots = data_dir() + "/ek-roots";
  }
  request.strict = o.strict;
  request.server.max_clients = o.max_clients;
  request.server.max_clients_per_uid = o.max_connections;
  request.server.uid_limits.max_sessions = o.max_sessions;
  request.server.uid_limits.max_objects = o.max_objects;
  request.server.log = [&log](const std::string& line) { log.server_line(line); };
  serve::ProtectedServer* served_ptr = nullptr;  // set once the server is open
  request.server.tick = [&signals, &notifier, &log, &served_ptr] { on_tick(signals, notifier, log, &served_ptr); };
  std::unique_ptr<MeasuredTransport> emulated;  // outlives the server: declared first
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<serve::ProtectedServer> served, open_server(o, std::move(request), emulated));
  served_ptr = served.get();
  server::Server& server = served->server();
  TPMSEC_ASSIGN_OR_RETURN(std::string fronts, serve_fronts(o, activated, server));
  log.line(server::kLogInfo, fmt::format("serving {}{}", served->startup_line(), fronts));
  notifier.notify(fmt::format("READY=1\nSTATUS=serving {}{}", served->protected_tpm().transport().describe(), fronts));
  Status ran = server.run(signals.stop());
  notifier.notify("STOPPING=1\nSTATUS=stopping: flushing every client's handles and the session");
  const serve::ServeCounts c = served->counts();
  log.line(server::kLogInfo,
           fmt::format("stopped: {} client commands, {} session(s) started, {} answered with a resource-manager "
                       "error, {} refused for naming another's handle",
                       c.commands, c.sessions_started, c.faults, c.refused));
  if (o.verbose) fmt::print(stderr, "{}", served->counts_report());
  served_ptr = nullptr;
  served.reset();  // the server's session flushed, on the emulated chip too
  if (emulated) report_emulated(*emulated);
  return ran;  // a front end's failure (the D-Bus front's bus gone) stops the server with it
}

}  // namespace

void register_serve(CLI::App& app, Action* action) {
  auto o = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand(
      "serve",
      "Own the TPM and serve every program, tpmsec's protected session on each command: tpm2-abrmd's D-Bus "
      "interface and a Unix socket (a resource manager: a handle space per client)");
  o->tpm.add_to(sub, /*state_changing=*/true);
  o->tpm.applies.policy = true;
  o->protection.add_to(sub, o->tpm);
  sub->add_option("--policy", o->policy, "The policy file (default: $TPMSEC_POLICY, else the shipped one)");
  sub->add_flag("--strict", o->strict,
                "Refuse a client command whose secret would cross the bus in clear (answered "
                "TSS2_RESMGR_RC_NOT_PERMITTED)");
  sub->add_option("--dbus", o->dbus, "Which bus to take com.intel.tss2.Tabrmd on: system (default), session, or none")
      ->check(CLI::IsMember({"system", "session", "none"}))
      ->capture_default_str();
  sub->add_option("--dbus-address", o->dbus_address, "Connect to this D-Bus address instead of the bus's default");
  sub->add_option("--socket", o->socket,
                  "Also serve a Unix socket at PATH (one command written, one response read, as /dev/tpmrm0), "
                  "unless systemd passed one (tpmsec.socket)");
  sub->add_option("--socket-group", o->socket_group,
                  "The group of --socket's file, mode 0660 (default: this process's; tss as /dev/tpmrm0's)");
  sub->add_option("--max-clients", o->max_clients,
                  "Connections at once per front end (the socket, D-Bus); when full, the idlest connection of the "
                  "uid holding most gives way to another uid's")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  sub->add_option("--max-connections", o->max_connections, "Connections at once per uid, every front end together")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  sub->add_option("--max-sessions", o->max_sessions,
                  "Sessions per uid (live, saved or kept after its client closed); a uid also gets at most its fair "
                  "share of the TPM's session handles while another uid needs one")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  sub->add_option("--max-transient-objects", o->max_objects, "Transient objects per uid, loaded or saved")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--ek-roots", o->ek_roots,
                  "With no anchor named: the EK roots (*.pem of DIR) the TPM's EK certificate may chain to "
                  "(default: the shipped bundle, <data>/ek-roots)");
  sub->add_option("--ek-intermediates", o->ek_intermediates,
                  "Intermediate CA certificates you cached, found by the file name their EK certificate's AIA gives "
                  "(nothing is fetched)");
  sub->add_flag("--forget-state", o->forget_state,
                "Forget what serve pinned for the TPM (evicting the salt key only if tpmsec made it) and exit: for a "
                "package's purge");
  sub->add_flag("-v,--verbose", o->verbose, "Say which policy rule decided, and what was wrapped per command code");
  sub->add_flag("--allow-root", o->allow_root,
                "Run even as root (refused without it, as tpm2-abrmd refuses: the unit runs serve as tss)");
  CLI::App* status = register_serve_status(sub, action);
  sub->callback([o, action, status] {
    if (status->parsed()) return;  // `serve status`: its own action
    *action = [o]() -> Status { return run_serve(*o); };
  });
}

}  // namespace tpmsec::cli
