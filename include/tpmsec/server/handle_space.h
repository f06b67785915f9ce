// Per-client handle spaces over one TPM: the resource manager of `tpmsec
// serve` and `tpmsec emulate --private-handles`, as Linux's /dev/tpmrm0
// (drivers/char/tpm/tpm2-space.c) and tpm2-abrmd (src/resource-manager.c)
// keep them. Every client sees a TPM of its own; none can name, use, save,
// list or flush what another created.
//
// Per client command (ResourceManager::execute):
//   - transient objects are virtual: a client names its objects by handles
//     0x80FFxxxx of its own, translated in the command's handle area and the
//     response's handle; a transient handle the client does not hold is
//     refused with TPM_RC_HANDLE for that handle position, as the kernel
//     refuses a vhandle it cannot map. An object stays loaded while nobody
//     needs its slot; when the TPM answers a command that needs one with
//     TPM_RC_OBJECT_MEMORY, the least recently used object of any client that
//     the command does not name is context-saved and flushed, and the command
//     sent again (only commands that change nothing but a slot: a forged
//     warning never applies a command twice); a saved object is loaded again
//     (ContextLoad) before a command that names it. So any number of clients
//     with several objects each work on a chip with three slots, and one
//     client alone pays nothing (the kernel saves and flushes after every
//     command, tpm2_save_space; the figures of docs/performance.md stay).
//     A TPM handle the TPM gives out anew is forgotten for whichever object
//     was taken to hold it (flushed behind the manager's back), and before a
//     command that may flush objects (TPMA_CC.extensive) every object is saved.
//   - sessions keep the TPM's handle (a session's Name is its handle: it
//     enters the cpHash of every policy command that names it, so a
//     translated handle would break the client's HMACs; the kernel and
//     tpm2-abrmd do not translate them either) but belong to the client
//     that started or loaded them: a session handle of another client, in
//     the handle area, the authorization area or a ContextSave,
//     ContextLoad or FlushContext, is refused (TPM_RC_HANDLE for that
//     handle position, session or parameter). A session is context-saved
//     (it keeps its handle, Part 1 §30) when StartAuthSession or a
//     ContextLoad needs its slot (TPM_RC_SESSION_MEMORY), least recently used
//     first, and loaded back before a command that names it; a session used
//     without continueSession is forgotten once the command succeeded.
//   - ContextSave, ContextLoad and FlushContext of the client's own handles
//     are translated and sent to the TPM (the TPM answers); a session the
//     client saved itself is bound to it: another client's ContextLoad of
//     that session is refused while its client is connected. When the client
//     closes, a session it saved itself is kept ("abandoned", tpm2-abrmd's
//     word: tpm2-tools saves a session in one process and loads it in the
//     next, as on /dev/tpmrm0) for a later client of the same peer identity
//     (uid) only, at most UidLimits::max_abandoned of them per uid (that
//     uid's oldest flushed first: one uid never flushes another's).
//     An object context is a key sealed to its hierarchy and still needs the
//     object's authorization: it is not bound (the kernel and tpm2-abrmd pass
//     an object's ContextLoad through), but what a client loads is its own.
//   - GetCapability(TPM_CAP_HANDLES) for transient objects or sessions
//     without an authorization session is answered from the client's space
//     (its own virtual handles, its own sessions; tpm2-abrmd's
//     get_cap_gen_response), never from the TPM's list. With a session on it,
//     the TPM's answer could not be filtered without breaking its HMAC: it
//     is refused (TPM_RC_VALUE, parameter 1).
//   - TPM_RC_CONTEXT_GAP (Part 1 §30.5): when a StartAuthSession or a
//     ContextSave fails with it, every saved session is loaded and saved
//     again, oldest first ("un-gapping", tpm2-abrmd's regap_session), and the
//     command is sent once more; the client's own saved blob of a session
//     stays valid (its ContextLoad is answered with the current context).
//   - limits per client: ClientLimits::max_objects (TPM_RC_OBJECT_MEMORY
//     beyond) and max_sessions (TPM_RC_SESSION_HANDLES beyond); every
//     context blob is bounded by the TPM's response size, so a client holds
//     at most (max_objects + max_sessions) * kMaxCommandBytes. Per uid, every
//     client of it together (UidLimits): objects, sessions (live, saved and
//     abandoned), abandoned sessions.
//   - fair shares of the TPM's session handles (its TPM_PT_ACTIVE_SESSIONS_MAX,
//     read at start(); src/server/fair_share.cc): a few are kept for root and
//     the server's own sessions; a uid may use the rest while nobody else
//     needs one, but when they are all taken, a uid under its fair share
//     (what is left over the uids holding sessions, at least one) gets one
//     from the uid holding most above its share (that uid's least recently
//     used session flushed, abandoned ones first), and a uid at or over its
//     share is refused (TPM_RC_SESSION_HANDLES) after its own oldest
//     abandoned session gave way.
//   - close(client): its loaded objects and every session it started and did
//     not save itself are flushed (FlushContext), its saved objects' blobs
//     dropped; shutdown() flushes every session the manager tracks,
//     abandoned ones included.
// Handles the server itself owns (reserve(): the session a CommandWrapper
// puts on every client command) pass through every space untranslated, are
// never saved, flushed or listed for a client.
//
// Every response is hostile input: read with frame_header.h's bounds and a
// Reader; a response that cannot be read leaves the space unchanged and goes
// back to the client as the TPM sent it. The server owns its TPM: when the
// TPM is full and nothing of any client's can be swapped out, an object or
// session nobody holds (its creating answer was lost or garbled on the bus)
// is flushed. Not thread-safe: the server runs one command at a time.
#ifndef TPMSEC_SERVER_HANDLE_SPACE_H_
#define TPMSEC_SERVER_HANDLE_SPACE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/constants.h"
#include "tpmsec/result.h"
#include "tpmsec/transport.h"

namespace tpmsec::server {

using ClientId = uint64_t;

// What one client may hold and send.
struct ClientLimits {
  size_t max_frame_bytes = kMaxCommandBytes;  // a larger command frame is refused and the connection closed
  int frame_timeout_ms = 5'000;               // a started frame, or an answer not read, may stall this long
  size_t max_objects = 16;                    // transient objects held at once (tpm2-abrmd: 27)
  size_t max_sessions = 8;                    // sessions held at once, loaded or saved (tpm2-abrmd: 4)
};

// What one peer uid may hold at once, all its clients together (clients
// without a uid are one group). Sessions count live, saved and abandoned.
struct UidLimits {
  size_t max_sessions = 32;   // TPM_RC_SESSION_HANDLES beyond
  size_t max_objects = 64;    // transient objects, loaded or saved: TPM_RC_OBJECT_MEMORY beyond
  size_t max_abandoned = 16;  // sessions kept after their client closed: the uid's oldest flushed beyond
};

// Who a client is, as the front end learned it (SO_PEERCRED for a Unix
// socket; D-Bus's credentials for a connection it hands over). A session a
// client saved survives its close only for a later client of the same uid;
// clients without one (TCP) form one group of their own. The pid is only
// informative (the log names the program): it may be reused once the client
// is gone.
struct PeerIdentity {
  std::optional<uint32_t> uid;
  std::optional<uint32_t> pid;
};

// "client 3, uid 1000, pid 4242 (tpm2_pcrextend)" for the log: what is
// known of the peer, its program's name read from /proc/PID/comm now (so
// call it while the peer is connected), non-printable bytes as '?'.
std::string describe_peer(ClientId client, const PeerIdentity& peer);
// The program name of process `pid` (/proc/PID/comm, printable ASCII only),
// empty when it cannot be read.
std::string program_of(uint32_t pid);

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

// One client's view: a Transport whose transmit() runs the command in the
// client's space, so a per-client CommandWrapper can sit above it (the
// client's frames → wrapper → space → TPM). Closes the client when
// destroyed.
class HandleSpace final : public Transport {
 public:
  HandleSpace(ResourceManager& manager, ClientId client, ClientLimits limits, PeerIdentity peer);
  ~HandleSpace() override;

  Result<Bytes> transmit(ByteView command) override;
  // ResourceManager::refusal for this client.
  std::optional<uint32_t> refusal(ByteView command) const { return manager_.refusal(client_, command); }
  std::string describe() const override { return "space"; }
  bool private_handles() const override { return true; }
  // The same space for the server's own commands on this client's behalf:
  // what they create is reserve()d, not the client's.
  Transport& server_view() { return server_view_; }
  ClientId client() const { return client_; }
  const PeerIdentity& peer() const { return peer_; }

 private:
  class ServerView final : public Transport {
   public:
    explicit ServerView(HandleSpace& space) : space_(space) {}
    Result<Bytes> transmit(ByteView command) override;
    std::string describe() const override { return "space (server)"; }
    bool private_handles() const override { return true; }

   private:
    HandleSpace& space_;
  };
  ResourceManager& manager_;
  ClientId client_;
  PeerIdentity peer_;
  ServerView server_view_{*this};
};

}  // namespace tpmsec::server

#endif  // TPMSEC_SERVER_HANDLE_SPACE_H_
