// What `tpmsec serve` owes the service manager and the journal as a system
// daemon, in the front end (the library layers know neither):
//   - sd_notify(3)'s datagram protocol, written here (a few lines; the
//     library layers stay free of libsystemd): READY=1 once the socket and
//     the bus are served and the TPM's session is up, STATUS= lines,
//     STOPPING=1, and WATCHDOG=1 every half $WATCHDOG_USEC from the server's
//     loop (ServerOptions::tick), so a wedged loop is restarted;
//   - log lines with the sd-daemon priority prefix (tpmsec-server/resource_manager/log_priority.h)
//     when stderr is the journal ($JOURNAL_STREAM names it, systemd.exec(5)),
//     plain otherwise.
#ifndef TPMSEC_SRC_CLI_SERVE_DAEMON_H_
#define TPMSEC_SRC_CLI_SERVE_DAEMON_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli.h"

namespace tpmsec::cli {

class ServiceNotifier {
 public:
  // Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID (the watchdog is
  // this process's only when WATCHDOG_PID is unset or names it).
  ServiceNotifier();
  ~ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  // One datagram of newline-separated assignments ("READY=1\nSTATUS=...");
  // nothing without $NOTIFY_SOCKET. A failure is not the daemon's: ignored.
  void notify(std::string_view state);
  // WATCHDOG=1 when half the watchdog interval passed since the last ping.
  void tick();
  // True every kStatusEvery (never without $NOTIFY_SOCKET): time for a STATUS= line.
  bool status_due();
  static constexpr std::chrono::seconds kStatusEvery{10};

 private:
  std::string address_;  // $NOTIFY_SOCKET ('@': abstract)
  int fd_ = -1;
  std::optional<std::chrono::microseconds> watchdog_;
  std::chrono::steady_clock::time_point last_ping_{};
  std::chrono::steady_clock::time_point last_status_ = std::chrono::steady_clock::now();
};

// The serve log: "tpmsec serve: TEXT" on stderr, "<N>" before it when
// stderr is the journal.
class DaemonLog {
 public:
  DaemonLog();
  // A line of the server layer or the library (its own "<N>" prefix, else a
  // warning: log_priority.h).
  void server_line(const std::string& line) const;
  void line(std::string_view priority, std::string_view text) const;  // priority: server::kLogInfo ...
  bool journal() const { return journal_; }

 private:
  bool journal_ = false;
};

// `tpmsec serve status` (serve_status.cc): a subcommand of `serve`'s.
CLI::App* register_serve_status(CLI::App* serve, Action* action);

// The prefix of the one error line main() prints: "<3>" once serve found
// stderr to be the journal (so `journalctl -p err` finds why it ended).
std::string_view error_line_prefix();

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_SERVE_DAEMON_H_
