// What the transports that talk to another process or a device wait for and
// accept, in one place.
#ifndef TPMSEC_SRC_TRANSPORT_TRANSPORT_LIMITS_H_
#define TPMSEC_SRC_TRANSPORT_TRANSPORT_LIMITS_H_

#include <cstddef>

namespace tpmsec::transport_limits {

// RSA key generation on slow TPMs takes tens of seconds.
inline constexpr int kTimeoutMs = 120'000;
// The largest response read; a TPM's own buffers are a few kilobytes.
inline constexpr size_t kMaxResponse = 64 * 1024;

}  // namespace tpmsec::transport_limits

#endif  // TPMSEC_SRC_TRANSPORT_TRANSPORT_LIMITS_H_
