// tpm2-abrmd's D-Bus front end: the name com.intel.tss2.Tabrmd, the object
// /com/intel/tss2/Tabrmd/Tcti and its interface com.intel.tss2.TctiTabrmd
// (CreateConnection, Cancel, SetLocality), wire-compatible with tpm2-abrmd
// 3.0, so that tpm2-tss's unchanged tabrmd TCTI (libtss2-tcti-tabrmd.so.0,
// which the TCTI loader tries when no TCTI is configured) reaches the server.
//
// What the client library expects (tpm2-software/tpm2-abrmd 3.0.0,
// src/tcti-tabrmd.c, tcti_tabrmd_connect; src/ipc-frontend-dbus.c,
// on_handle_create_connection; src/tabrmd.xml; src/tabrmd-error.c):
//  - CreateConnection() answers one uint64, the connection id, with exactly
//    ONE file descriptor attached that the body does not name (signature "t",
//    UNIX_FDS 1: the client's GDBus proxy checks the reply against "(t)" and
//    takes the descriptor from the message's fd list). It is one end of a
//    stream socket pair: the client writes whole command frames to it and
//    reads whole response frames from it.
//  - Cancel(t id) and SetLocality(t id, y locality) answer a uint32 that the
//    client returns as its TSS2_RC, or a D-Bus error named
//    com.intel.tss2.Tabrmd.Error.* that the client maps to TSS2_RESMGR_RC_*.
//    tpm2-abrmd answers an unknown connection NotPermitted and both calls
//    NotImplemented; here Cancel does the same and SetLocality is handed to
//    the server (callbacks below).
//  - A connection id is honoured only for the bus peer that created it
//    (tpm2-abrmd mixes the caller's PID into it; this keys it by the caller's
//    unique bus name, which another process cannot have).
//
// This layer only answers the bus: what a connection's frames mean is the
// server's. It is a source of the server's poll loop (server::PollSource)
// and never waits for a client; it asks the bus daemon for a caller's
// credentials without waiting (the reply follows the daemon's answer), and
// waits only for the bus socket to take a CreateConnection reply (at most
// 5 s: a wedged daemon).
#ifndef TPMSEC_TABRMD_TABRMD_BUS_H_
#define TPMSEC_TABRMD_TABRMD_BUS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tpmsec/result.h"
#include "tpmsec/server/poll_source.h"
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

#endif  // TPMSEC_TABRMD_TABRMD_BUS_H_
