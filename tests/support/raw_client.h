// A raw client of a TPM socket (tpmsec serve's, a resource manager's): frames
// written by hand, as a client that is not tpm2-tss writes them, and one
// command's round trip on a connected Unix socket. The round trip allocates
// nothing but what the caller gives it, so a child forked from a test
// process with other threads may call it. Shared by the serve tests
// (serve_attack_test, serve_interposer_test, serve_fairness_test) and the
// socket front's (server_socket_test, tabrmd_bus_test).
#ifndef TPMSEC_TESTS_SUPPORT_RAW_CLIENT_H_
#define TPMSEC_TESTS_SUPPORT_RAW_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/wire.h"

namespace tpmsec::testing {

// GetRandom(8), without sessions.
inline const Bytes kGetRandom8 = {0x80, 0x01, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x01, 0x7b, 0x00, 0x08};

// A command without sessions: its header, then what `body` writes.
Bytes no_sessions_command(uint32_t code, const std::function<void(Writer&)>& body);
// A command without sessions whose one parameter is a handle (FlushContext,
// ReadPublic, PolicyGetDigest, ...).
Bytes with_handle(uint32_t code, uint32_t handle);
// StartAuthSession(tpmKey = bind = TPM_RH_NULL) of session `type`, unsalted,
// no symmetric, SHA-256.
Bytes start_auth_session(uint8_t type);
// CreatePrimary(owner) of an HMAC key (KEYEDHASH, HMAC scheme, SHA-256)
// with `attributes` (TPMA_OBJECT) and `unique` in its template, under the
// password session: a transient object a raw client can make.
Bytes create_hmac_primary(uint32_t attributes, ByteView unique);
// HMAC(key, "use it") with the key's (empty) password.
Bytes hmac_with(uint32_t key);

// The response code in a response's header; 0xFFFFFFFF when it is shorter.
uint32_t rc_of(ByteView response);

// A connected Unix stream socket (close-on-exec), or -1.
int connect_unix(const std::string& path);
// One command over a connected socket, its whole response into `out` (at
// most `cap` bytes): the size, or 0 on failure or when no answer came in 60 s.
size_t transact_once(int fd, ByteView command, uint8_t* out, size_t cap);
// The same, sent again while the TPM answers TPM_RC_RETRY (as a TSS does;
// libtpms asks so at a key's first use while it tests the algorithm).
size_t transact(int fd, ByteView command, uint8_t* out, size_t cap);
// The same into a buffer of its own (up to 64 KiB): empty on failure.
Bytes transact(int fd, ByteView command);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_RAW_CLIENT_H_
