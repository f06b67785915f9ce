// describe_peer (tpmsec/server/handle_space.h): who a client is, for the log.
#include <fmt/format.h>

#include <fstream>
#include <string>

#include "tpmsec/server/handle_space.h"

namespace tpmsec::server {

std::string describe_peer(ClientId client, const PeerIdentity& peer) {
  std::string line = fmt::format("client {}", client);
  if (peer.uid) line += fmt::format(", uid {}", *peer.uid);
  if (!peer.pid) return line;
  line += fmt::format(", pid {}", *peer.pid);
  // The kernel's task name (TASK_COMM_LEN, 16 with its NUL): at most 15
  // bytes, the program's to choose, so nothing but printable ASCII is kept.
  std::ifstream in(fmt::format("/proc/{}/comm", *peer.pid));
  std::string comm;
  if (!std::getline(in, comm) || comm.empty()) return line;
  if (comm.size() > 15) comm.resize(15);
  for (char& ch : comm) {
    if (ch < 0x20 || ch > 0x7e) ch = '?';
  }
  return line + " (" + comm + ")";
}

}  // namespace tpmsec::server
