// Constructors for the concrete transports. Most callers use
// open_transport(spec) from tpm_string.h; these are for code (and tests)
// that builds a transport directly.
#ifndef TPMSEC_TRANSPORT_TRANSPORTS_H_
#define TPMSEC_TRANSPORT_TRANSPORTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tpmsec/transport.h"

namespace tpmsec {

// In-process libtpms. libtpms is a process-wide singleton: only one embedded
// transport may exist at a time (a second open fails with kRuntime).
// With an empty state_dir the TPM is manufactured fresh in memory; otherwise
// its NV state is loaded from and saved to state_dir, and the TPM is resumed
// (Startup(STATE)) when the previous process shut it down orderly.
Result<std::unique_ptr<Transport>> open_embedded(const std::string& state_dir = "");

// Platform signals of the embedded TPM, for a server that plays a chip's
// platform (`tpmsec emulate`); kUnsupported for any other transport.
// _TPM_Init alone (power-on or reset; the client then sends Startup), with
// the volatile state dropped when `delete_volatile`:
Status embedded_tpm_init(Transport& embedded, bool delete_volatile);
// Power off: commands fail until the next embedded_tpm_init.
Status embedded_power_off(Transport& embedded);
// The locality (0..4) libtpms runs the following commands at.
Status embedded_set_locality(Transport& embedded, uint8_t locality);

struct SwtpmAddress {
  std::string host = "localhost";
  uint16_t port = 2321;
  std::string path;  // Unix socket instead of host/port
  uint16_t ctrl_port = 0;
  std::string ctrl_path;
  std::string ctrl_host;  // defaults to host
  // handles=private: the server gives this connection handles of its own and
  // flushes them when it closes (Transport::private_handles()).
  bool private_handles = false;
};
Result<std::unique_ptr<Transport>> open_swtpm(const SwtpmAddress& address);

// The Microsoft simulator's protocol (tpm2-tss tcti-mssim; TpmTcpProtocol.h
// of the reference implementation): on the TPM port each command is framed
// as u32 TPM_SEND_COMMAND, u8 locality, u32 size, the command, and answered
// by u32 size, the response, u32 0; the platform port (port + 1) takes u32
// signals (power on, NV on, reset), each answered by u32 0. Opening it powers
// the TPM on and turns NV on through the platform port, as tpm2-tss does,
// then sends Startup(CLEAR) if the TPM needs it.
struct MssimAddress {
  std::string host = "localhost";
  uint16_t port = 2321;  // the platform port is port + 1
  // handles=private, as SwtpmAddress's (tpmsec emulate --protocol mssim
  // --private-handles).
  bool private_handles = false;
};
Result<std::unique_ptr<Transport>> open_mssim(const MssimAddress& address);

// A TPM character device (/dev/tpm0, /dev/tpmrm0): one write() of the whole
// command, one read() of the whole response.
Result<std::unique_ptr<Transport>> open_device(const std::string& path);
// The same protocol over an already open file descriptor (owned from now on).
std::unique_ptr<Transport> device_from_fd(int fd, std::string label);

// A `tpmsec serve` server's Unix socket (docs/serve.md): the /dev/tpmrm0
// protocol (one command written, one response read; a connection is a client
// with handles of its own). The response is read as its header's size says,
// at most the transports' limit, within their deadline. Connecting checks who
// listens (SO_PEERCRED): root, else `uid` when given, else the tss user; a
// socket another user planted is refused (kRuntime, no TPM reached), never
// spoken to.
inline constexpr const char* kServeSocket = "/run/tpmsec/tpm.sock";  // tpmsec.socket's
struct ServeAddress {
  std::string path = kServeSocket;
  std::optional<uint32_t> uid;  // uid=N: the server's uid, instead of tss's
};
Result<std::unique_ptr<Transport>> open_serve(const ServeAddress& address);

// The TPM string each transport describes itself by (Transport::describe()),
// rendered once, here, from what it was opened with: the transports call
// these, and tpm_string_of(TpmSpec) (tpm_string.h) renders a TPM string the
// same way without opening it, so a TPM's identity (TpmId, host state's key)
// is known before, or without, a connection. handles=private and ctrlhost=
// say how to reach the server, not which TPM it is: left out.
std::string tpm_string_of(const SwtpmAddress& address);
std::string tpm_string_of(const MssimAddress& address);
std::string tpm_string_of(const ServeAddress& address);
std::string device_tpm_string(const std::string& path);
std::string embedded_tpm_string(const std::string& state_dir);

}  // namespace tpmsec

#endif  // TPMSEC_TRANSPORT_TRANSPORTS_H_
