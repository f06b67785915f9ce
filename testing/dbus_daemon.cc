#include "testing/dbus_daemon.h"

#include <poll.h>
#include <unistd.h>

#include "testing/child_process.h"

namespace tpmsec::testing {

pid_t start_dbus_daemon(const std::vector<std::string>& args, std::string* address, const std::string& err_file) {
  std::vector<std::string> argv{"dbus-daemon", "--nofork", "--print-address=1"};
  argv.insert(argv.end(), args.begin(), args.end());
  int out = -1;
  address->clear();
  pid_t pid = spawn(argv, {}, &out, err_file);
  if (pid <= 0) return pid;
  // The address is printed once the bus accepts connections.
  char c;
  pollfd p{out, POLLIN, 0};
  while (::poll(&p, 1, 60000) > 0 && ::read(out, &c, 1) == 1 && c != '\n') *address += c;
  ::close(out);
  return pid;
}

}  // namespace tpmsec::testing
