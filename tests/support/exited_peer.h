// A connection to a Unix socket made by a process that is gone. The server's
// socket front gives each peer process one handle space, kept for as long
// as the process lives (docs/serve.md, "A handle space per process"), so
// several connections of this test process would share one. A test that
// lets a connection stand for another program (a neighbour, a client that
// dies) connects through a child that passes the socket back and exits: no
// other connection comes from that process, so the connection's space is
// its own, and ends when it closes (its process gone).
#ifndef TPMSEC_TESTS_SUPPORT_EXITED_PEER_H_
#define TPMSEC_TESTS_SUPPORT_EXITED_PEER_H_

#include <string>

namespace tpmsec::testing {

// The connected socket (close-on-exec, blocking), or -1.
int connect_from_exited_process(const std::string& path);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_EXITED_PEER_H_
