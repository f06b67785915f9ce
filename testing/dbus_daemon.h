// A dbus-daemon of a test's or the soak's own (library
// tpmsec_test_processes, never installed): started, and its address read
// from what it prints once it accepts connections. What the bus allows is
// the caller's: its configuration file (support/private_bus.h: the system
// bus's policy; bench/soak: every user may do anything).
#ifndef TPMSEC_TESTING_DBUS_DAEMON_H_
#define TPMSEC_TESTING_DBUS_DAEMON_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace tpmsec::testing {

// `dbus-daemon --nofork --print-address=1 ARGS` (ARGS: --config-file=FILE,
// or --session --address=ADDRESS), its standard error to `err_file` if
// given. Its pid, and its address in *address once it printed it (within
// 60 s); *address is empty when it printed none (the daemon may still run:
// stop it).
pid_t start_dbus_daemon(const std::vector<std::string>& args, std::string* address, const std::string& err_file = {});

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTING_DBUS_DAEMON_H_
