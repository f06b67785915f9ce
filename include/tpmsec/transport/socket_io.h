// Small POSIX socket and fd helpers shared by the swtpm and device transports.
#ifndef TPMSEC_TRANSPORT_SOCKET_IO_H_
#define TPMSEC_TRANSPORT_SOCKET_IO_H_

#include <string>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"
#include "tpmsec/unique_fd.h"

namespace tpmsec::io {

using Fd = UniqueFd;  // unique_fd.h

Result<Fd> connect_tcp(const std::string& host, uint16_t port, const std::string& what);
Result<Fd> connect_unix(const std::string& path, const std::string& what);

// Writes all of data; reads exactly n bytes. Waits at most timeout_ms for each
// chunk to become possible (a TPM may legitimately take seconds).
Status write_all(int fd, ByteView data, const std::string& what);
Status read_exact(int fd, MutableByteView out, int timeout_ms, const std::string& what);
// Bounds each wait of a blocking read on fd (SO_RCVTIMEO), so that
// read_frame() needs no poll() before its reads.
Status set_receive_timeout(int fd, int timeout_ms, const std::string& what);
// Reads one TPM response frame (its header's size, from 10 to max bytes) from
// a blocking socket with as few reads as it allows: a frame that arrived
// whole takes one read. Each wait is bounded by the socket's receive timeout
// (set_receive_timeout). One command is in flight, so a byte beyond the frame
// is the server's error, never the next response (a parse error).
Result<Bytes> read_frame(int fd, size_t max, const std::string& what);

}  // namespace tpmsec::io

#endif  // TPMSEC_TRANSPORT_SOCKET_IO_H_
