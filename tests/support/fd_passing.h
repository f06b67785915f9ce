// A descriptor passed over a Unix socket (SCM_RIGHTS) with a few bytes of
// data beside it: how a forked child hands the test a connection it made
// (exited_peer.h; server_socket_test). System calls only, on the caller's
// buffers, so a child forked from a test process with other threads may
// call them.
#ifndef TPMSEC_TESTS_SUPPORT_FD_PASSING_H_
#define TPMSEC_TESTS_SUPPORT_FD_PASSING_H_

#include <cstddef>

namespace tpmsec::testing {

// Sends `fd` over the socket `via` with the `size` bytes at `data` (at least
// one): true when all of them went.
bool send_fd(int via, int fd, const void* data, size_t size);

// Receives a descriptor (close-on-exec) with `size` bytes of data into
// `data` from the socket `via`: the descriptor, or -1 when none came with
// all of the data.
int receive_fd(int via, void* data, size_t size);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_FD_PASSING_H_
