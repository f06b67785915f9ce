// One client connection of the soak (bench/soak): `tpmsec serve`'s socket,
// written and read as /dev/tpmrm0 is, or its D-Bus front through Debian's
// tabrmd TCTI (libtss2-tcti-tabrmd.so.0, loaded with dlopen as tpm2-tss's
// loader does). Used only in a forked client process, after it took its uid.
#ifndef TPMSEC_BENCH_SOAK_CLIENT_H_
#define TPMSEC_BENCH_SOAK_CLIENT_H_

#include <memory>
#include <optional>
#include <string>

#include "tpmsec/bytes.h"

namespace tpmsec::soak {

enum class Front { kSocket, kDbus };

class Connection {
 public:
  virtual ~Connection() = default;
  // The whole response, or nullopt when none came (closed, refused, 120 s).
  virtual std::optional<Bytes> transact(ByteView command) = 0;
  // Writes `command` (or its first `bytes`) and returns without reading: the
  // client is about to be killed with a command in flight.
  virtual void send_only(ByteView command) = 0;
};

// nullptr when the front refused the connection.
std::unique_ptr<Connection> connect_socket(const std::string& path);
std::unique_ptr<Connection> connect_dbus();  // the session bus of the environment
// The TPM's own data port (swtpm's protocol: raw frames over TCP on 127.0.0.1).
std::unique_ptr<Connection> connect_tcp(uint16_t port);
// A TCP connection to 127.0.0.1:port (close-on-exec), or -1.
int connect_loopback(uint16_t port);

}  // namespace tpmsec::soak

#endif  // TPMSEC_BENCH_SOAK_CLIENT_H_
