// The resource manager: per-client handle spaces over one TPM, as Linux's
// /dev/tpmrm0 (drivers/char/tpm/tpm2-space.c) and tpm2-abrmd keep them.
// Every client sees a TPM of its own: its transient objects under virtual
// handles, its sessions its own; none can name, use, save, list or flush
// what another created; what a closed client created is flushed; objects
// and sessions are swapped out for whoever needs a slot; per client and per
// uid limits and fair shares of the TPM's session handles bound what one
// may hold. docs/serve.md ("The resource manager") says how, rule by rule.
// Owns: its records of every client's handles; the TPM (a Transport) is the
// caller's and must outlive it. Every response is hostile input: one that
// cannot be read changes nothing and goes back as the TPM sent it. Not
// thread-safe: the server runs one command at a time. Only the server layer
// and what composes it (serve's protected server) see this header
// (scripts/check-includes); a front end hands Server a ClientConnection.
#ifndef TPMSEC_SERVER_RESOURCE_MANAGER_RESOURCE_MANAGER_H_
#define TPMSEC_SERVER_RESOURCE_MANAGER_RESOURCE_MANAGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tpmsec-server/resource_manager/client.h"
#include "tpmsec/bytes.h"
#include "tpmsec/result.h"
#include "tpmsec/transport.h"

namespace tpmsec::server {

class ResourceManager {
 public:
  static constexpr size_t kMaxAbandoned = UidLimits{}.max_abandoned;  // per uid
  using Log = std::function<void(const std::string&)>;

  // `tpm` is the one TPM (it must outlive the manager); `log` gets a line
  // for what the manager does on its own (may be empty).
  ResourceManager(Transport& tpm, Log log = {});
  ~ResourceManager();  // shutdown()
  ResourceManager(const ResourceManager&) = delete;
  ResourceManager& operator=(const ResourceManager&) = delete;

  // Reads the TPM's command list (TPM_CAP_COMMANDS), as the kernel's
  // tpm2_get_cc_attrs_tbl does: a command code the command table does not
  // know is sent only when the TPM does not implement it either (the TPM
  // then refuses it before reading a handle). From `attributes_from` when
  // given (an emulated chip's unbilled bookkeeping), else from the TPM; and
  // its session handles (TPM_PT_ACTIVE_SESSIONS_MAX, 64 when not told).
  Status start(Transport* attributes_from = nullptr);

  // Per uid limits (before the first client opens).
  void set_uid_limits(UidLimits limits);
  // The TPM's session handles (TPM_PT_ACTIVE_SESSIONS_MAX as start() read it).
  size_t session_pool() const;

  void open(ClientId client, ClientLimits limits, PeerIdentity peer);
  // One command of `client`, with its virtual handles; the response as the
  // client must see it (always a TPM response frame). `as_server`: what the
  // command creates is the server's (reserve()d), e.g. the session a
  // wrapper above this client's space starts for it.
  Bytes execute(ClientId client, ByteView command, bool as_server = false);
  // Admission: whether `client` may send `command` as it is. Every handle
  // and session it names (handle area, authorization area, a FlushContext's
  // handle, the session context a ContextLoad carries) must be the client's
  // own; the refusal is the response code execute() would answer. Reads the
  // manager's state and changes none of it: what stands above a space and
  // keeps state under TPM handles (a wrapper) asks this first, so a frame
  // refused here changes nothing for anyone.
  std::optional<uint32_t> refusal(ClientId client, ByteView command) const;
  // The last execute() sent a command whose answer never came (the TPM's
  // transport failed; execute() answered TPM_RC_FAILURE): the TPM may have
  // run it, so a session on it may have moved on.
  bool answer_lost() const;
  void close(ClientId client);
  // Flushes every session the manager tracks (and forgets every client).
  void shutdown();
  // The TPM was reset (TPM2_Startup(CLEAR) after _TPM_Init): every
  // transient object and session, loaded or saved, went with it and the
  // TPM gives their handles out anew. What every client held, the sessions
  // abandoned and the server's own (reserve()d) handles are forgotten
  // without a flush (a flush could hit what the TPM has given another
  // since); every session is reported ended (report_ended_sessions). The
  // clients stay open: a handle one held is refused as any it does not
  // hold. Safe from the TPM's transport while a call of the manager runs
  // (the bus that saw the reset): the records go when that call returns.
  void tpm_was_reset();

  // Handles the server owns: passed through untranslated, never saved,
  // flushed or listed for a client.
  void reserve(uint32_t handle);
  void release(uint32_t handle);

  // With reporting on, the sessions the manager stopped tracking (flushed,
  // ended by a command, dropped with their client, abandoned past the
  // limit) since the last take: state kept above under their handles goes
  // with them, before the TPM gives the handle to another client.
  void report_ended_sessions(bool on);
  std::vector<uint32_t> take_ended_sessions();

  // Entries held (clients, objects, sessions, abandoned): bounded, and 0
  // once every client closed and nothing was abandoned.
  size_t entries() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_RESOURCE_MANAGER_RESOURCE_MANAGER_H_
