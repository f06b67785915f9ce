// tpm2-abrmd's D-Bus interface (com.intel.tss2.Tabrmd, object
// /com/intel/tss2/Tabrmd/Tcti, interface com.intel.tss2.TctiTabrmd:
// CreateConnection, Cancel, SetLocality), wire-compatible with tpm2-abrmd
// 3.0, so that tpm2-tss's unchanged tabrmd TCTI reaches the server; what the
// client library expects, and where this differs, is docs/serve.md ("The
// D-Bus interface"). CreateConnection answers an id and one end of a stream
// socket pair; the other end goes to on_connection. An id is honoured only
// for the bus peer (unique name) that created it. Owns the bus connection
// and the ids. This layer only answers the bus: what a connection's frames
// mean is the server's. A source of the server's loop (server::PollSource):
// it never waits for a client, asks the bus daemon for a caller's
// credentials without waiting, and waits only for the bus socket to take a
// CreateConnection reply (at most 5 s: a wedged daemon). Not thread-safe.
#ifndef TPMSEC_SERVER_TABRMD_TABRMD_BUS_H_
#define TPMSEC_SERVER_TABRMD_TABRMD_BUS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tpmsec-server/resource_manager/poll_source.h"
#include "tpmsec/result.h"
#include "tpmsec/unique_fd.h"

namespace tpmsec::tabrmd {

inline constexpr const char* kTabrmdBusName = "com.intel.tss2.Tabrmd";
inline constexpr const char* kTabrmdObjectPath = "/com/intel/tss2/Tabrmd/Tcti";
inline constexpr const char* kTabrmdInterface = "com.intel.tss2.TctiTabrmd";

// TSS2_RESMGR_RC_* (tss2_common.h: layer 11), what the D-Bus errors below
// mean to the client.
inline constexpr uint32_t kResmgrRcGeneralFailure = 0x000B0001;
inline constexpr uint32_t kResmgrRcNotImplemented = 0x000B0002;
inline constexpr uint32_t kResmgrRcBadValue = 0x000B000B;
inline constexpr uint32_t kResmgrRcNotPermitted = 0x000B000C;

using OwnedFd = UniqueFd;  // unique_fd.h

// Who asked for a connection, as the bus daemon reports the caller (not
// what the caller claims). The socket pair's own peer credentials are this
// process's, so this is the only place the client's identity is known.
struct BusPeer {
  std::string unique_name;  // ":1.42"
  uid_t uid = static_cast<uid_t>(-1);
  pid_t pid = 0;
};

struct TabrmdCallbacks {
  // A client's new connection: the server's end of its socket pair (stream,
  // close-on-exec, blocking as created; the server sets what it needs), the
  // id the client was given, and who the client is. The server owns the
  // descriptor from here; when it is done with the connection it calls
  // TabrmdBus::connection_closed(id).
  std::function<void(OwnedFd server_end, uint64_t id, const BusPeer& peer)> on_connection;
  // SetLocality(id, locality) from the connection's own client: the server
  // applies `locality` to that connection's later commands and returns the
  // TSS2_RC the client's Tss2_Tcti_SetLocality returns (0: done). Unset:
  // NotImplemented, as tpm2-abrmd 3.0 answers.
  std::function<uint32_t(uint64_t id, uint8_t locality)> on_set_locality;
};

struct TabrmdBusOptions {
  enum class Bus { kSystem, kSession };
  Bus bus = Bus::kSystem;
  // Else sd-bus's default for `bus` ($DBUS_SYSTEM_BUS_ADDRESS or the system
  // socket; $DBUS_SESSION_BUS_ADDRESS).
  std::string address;
  std::string name = kTabrmdBusName;
  // Connections open at once; CreateConnection beyond answers
  // com.intel.tss2.Tabrmd.Error.General, as tpm2-abrmd's limit does (its
  // default 27, TABRMD_CONNECTIONS_MAX_DEFAULT).
  size_t max_connections = 27;
};

class TabrmdBus : public server::PollSource {
 public:
  // Connects to the bus, exports the object and takes the name (fails if
  // another owner holds it, e.g. tpm2-abrmd, or the bus policy refuses it).
  static Result<std::unique_ptr<TabrmdBus>> open(const TabrmdBusOptions& options, TabrmdCallbacks callbacks);
  ~TabrmdBus() override;
  TabrmdBus(const TabrmdBus&) = delete;
  TabrmdBus& operator=(const TabrmdBus&) = delete;

  int fd() const override;
  short events() const override;
  int timeout_ms() const override;
  Status process() override;

  // The server is done with connection `id` (its client hung up, or the
  // server dropped it): the id is forgotten and its slot freed.
  void connection_closed(uint64_t id);
  size_t open_connections() const;

 private:
  struct Impl;
  explicit TabrmdBus(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpmsec::tabrmd

#endif  // TPMSEC_SERVER_TABRMD_TABRMD_BUS_H_
