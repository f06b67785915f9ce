// What serve tells the administrator when a client's secret crossed the bus
// in clear (CommandWrapper::last_clear(), wrap.h): one warning line per
// client and command code, naming the command, why, the client's uid, pid
// and program, and the fix; with the syslog priority prefix journald reads
// on a service's stderr (<4>, warning; sd-daemon(3)).
#ifndef TPMSEC_SRC_PROTECTED_SERVER_CLEAR_WARNING_H_
#define TPMSEC_SRC_PROTECTED_SERVER_CLEAR_WARNING_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec/wrap.h"

namespace tpmsec::serve {

// The warning line for `command` (its name and code).
std::string clear_warning(std::string_view command, uint32_t code, const ClearNote& note,
                          const server::PeerIdentity& peer, std::string_view program);

// One client's warnings: true the first time a command code is seen.
class ClearWarnings {
 public:
  bool first(uint32_t code) { return warned_.insert(code).second; }

 private:
  std::set<uint32_t> warned_;
};

}  // namespace tpmsec::serve

#endif  // TPMSEC_SRC_PROTECTED_SERVER_CLEAR_WARNING_H_
