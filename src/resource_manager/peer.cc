// describe_peer and program_of (tpmsec-server/resource_manager/client.h): who a client is,
// for the log.
#include <fmt/format.h>

#include <fstream>
#include <string>

#include "tpmsec-server/resource_manager/client.h"

namespace tpmsec::server {

std::string program_of(uint32_t pid) {
  if (pid == 0) return "";
  // The kernel's task name (TASK_COMM_LEN, 16 with its NUL): at most 15
  // bytes, the program's to choose, so nothing but printable ASCII is kept.
  std::ifstream in(fmt::format("/proc/{}/comm", pid));
  std::string comm;
  if (!std::getline(in, comm)) return "";
  if (comm.size() > 15) comm.resize(15);
  for (char& ch : comm) {
    if (ch < 0x20 || ch > 0x7e) ch = '?';
  }
  return comm;
}

std::string describe_peer(ClientId client, const PeerIdentity& peer) {
  std::string line = fmt::format("client {}", client);
  if (peer.uid) line += fmt::format(", uid {}", *peer.uid);
  if (!peer.pid) return line;
  line += fmt::format(", pid {}", *peer.pid);
  const std::string comm = program_of(*peer.pid);
  return comm.empty() ? line : line + " (" + comm + ")";
}

}  // namespace tpmsec::server
