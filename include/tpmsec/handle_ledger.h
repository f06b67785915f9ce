// Which TPM handles a Tpm may flush: the bookkeeping of Tpm's handle ledger
// (the commands it sends for it are in tpm.h).
//
// Response handles are not covered by any HMAC (Part 1 §18.9), so a handle
// named by a response proves nothing. tpmsec flushes only what it created:
//   owned    handles a parsed response of a creating command (CommandInfo::
//            creates_handle) named, accepted by adopt(), and not flushed or
//            forgotten since;
//   foreign  the baseline: the transient objects and sessions present in the
//            TPM before this Tpm's first creating command. Never adopted,
//            never flushed.
// A response naming an owned or foreign handle, or one of the wrong type, is
// refused (kIntegrity) and the handle is neither adopted nor flushed.
//
// When a creating command's outcome is unknown (lost, unparseable,
// unauthenticated, or an error code that may be forged after the TPM ran it),
// or a flush of an owned handle did not clearly succeed, a sweep is pending.
// A handle whose flush did not clearly succeed is flushed again by number
// (it was this Tpm's). The strays (listed handles neither owned nor foreign)
// a sweep flushes are those of the kind the failed command creates:
//   objects   after a CreatePrimary, Load or object ContextLoad, or an
//             object's flush: the transient objects;
//   sessions  after a StartAuthSession, or a session's flush: over a bus,
//             only the loaded sessions of that session's type (the TPM lists
//             loaded sessions by type, 0x02… HMAC, 0x03… policy; Part 3
//             §30.2), never a saved one or one of the other type: a lost
//             session is loaded (nobody received its handle to save it);
//             in process (no bus: the baseline cannot have been tampered
//             with) every session not owned, loaded or saved, as always.
// A session's ContextLoad creates nothing (the session keeps its handle).
// This assumes the TPM's handles are shared with nobody who
// creates new ones while this Tpm lives (true for the embedded TPM, for
// swtpm, which serves one connection at a time, and for /dev/tpm0, which
// admits one opener; the kernel's own commands run under the chip lock and it
// keeps no session of its own while /dev/tpm0 is open: Linux commit
// df745e25098d, "tpm: Lazily flush the auth session"). One Tpm per TPM
// connection: handles another Tpm object creates on the same connection
// after this one's baseline look like strays to it. /dev/tpmrm* is
// different: transient handles are virtualized per client and the kernel
// flushes a client's handles when it closes, but session handles are global
// there (linux drivers/char/tpm/tpm2-space.c maps only transient handles), so
// no baseline is taken and nothing is swept (Transport::private_handles()).
//
// What the ledger does not do: a response handle the TPM did not create but
// that is neither owned nor foreign (an unused number) is adopted; it turns
// out when the handle is used or flushed (TPM_RC_HANDLE: the flush then
// sweeps, finding the real one). The baseline and the listings of a sweep
// are not authenticated (the baseline comes before any session that could
// authenticate it): an interposer can hide another client's handle from it.
// Such a hidden handle survives a sweep of another kind or session type; one
// of the very kind the failed command creates is flushed (tpmsec's own
// stray and it look the same through every listing). That gives an
// interposer nothing: FlushContext needs no authorization (Part 3 §28.4), so
// it can flush any handle itself
// (docs/threat-model.md, "Handles"). An interposer can always cause leaks by
// dropping commands (a FlushContext answered with a forged success without
// reaching the TPM leaves its handle behind unnoticed, until a later sweep
// finds it), and can flush anything itself; what it cannot do is make tpmsec
// flush its own live handles or a handle it knows is someone else's.
// One more flush of handles a Tpm did not create, outside the ledger: what a
// dead process of the TCTI recorded as its own (held_handles.h), at the next
// start; the ledger's held() is what those records hold.
// Tested in tests/tpm/handle_ledger_test.cc and tests/session/leak_test.cc.
#ifndef TPMSEC_HANDLE_LEDGER_H_
#define TPMSEC_HANDLE_LEDGER_H_

#include <cstdint>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "tpmsec/command.h"
#include "tpmsec/result.h"

namespace tpmsec {

// A handle a Tpm holds on the TPM: one it owns, or one of its own whose
// flush has not clearly succeeded yet (Sweep::unflushed). `saved`: a session
// context-saved (ContextSave) and not loaded back since; it keeps its handle
// (Part 1 §30.2) and is listed among the saved sessions, not the loaded ones.
// What a front end records so that the next process can flush what this one
// left when it died (held_handles.h).
struct HeldHandle {
  uint32_t handle = 0;
  bool saved = false;
  bool operator==(const HeldHandle&) const = default;
};

class HandleLedger {
 public:
  // Transient objects and sessions: the only handles the ledger tracks, and
  // the only ones a sweep ever flushes.
  static bool tracked(uint32_t handle);
  // A session is one slot whatever its handle says: the TPM lists a policy
  // session as 0x03…, a saved one as 0x02…, and flushes it under either.
  static uint32_t slot(uint32_t handle);

  bool owns(uint32_t handle) const { return owned_.count(slot(handle)) != 0; }
  bool foreign(uint32_t handle) const { return foreign_.count(slot(handle)) != 0; }
  size_t owned_count() const { return owned_.size(); }

  bool has_baseline() const { return has_baseline_; }
  // The handles present before the first creating command (empty where none
  // is needed: in-process or private-handle transports).
  void set_baseline(std::span<const uint32_t> present);

  // A handle another client of the same connection created after the
  // baseline (the program whose commands a CommandWrapper passes on:
  // wrap.h): never a stray, never flushed. Ignored for a handle owned here.
  void add_foreign(uint32_t handle);
  // That client flushed it: the TPM may hand out its number again.
  void foreign_gone(uint32_t handle) { foreign_.erase(slot(handle)); }

  // Checks the response handle of `command` against `expected` and owns it.
  // A session's ContextLoad that names its own handle changes nothing.
  Status adopt(std::string_view command, const CreatedHandle& expected, uint32_t handle);
  // No longer owned: flushed, or ended by the TPM (an authenticated response).
  void forget(uint32_t handle) { owned_.erase(slot(handle)); }
  // An owned session was context-saved, or loaded back (a successful
  // ContextSave / ContextLoad of it); ignored for a handle not owned.
  void note_saved(uint32_t handle, bool saved);
  // The handles held (owned, or unflushed), in handle order.
  std::vector<HeldHandle> held() const;

  // Of `listed`, the tracked handles neither owned nor foreign.
  std::vector<uint32_t> strays(std::span<const uint32_t> listed) const;

  // What a sweep must do.
  struct Sweep {
    uint8_t kinds = 0;             // kind_bit()s: objects, HMAC sessions, policy sessions
    std::set<uint32_t> unflushed;  // this Tpm's handles whose flush did not clearly succeed
    bool empty() const { return kinds == 0 && unflushed.empty(); }
  };

  // A creating command for a handle of `type` (ht::kTransient or a session
  // type) may have left one nobody received: the next sweep covers that type
  // (transient objects, or loaded sessions of that session type).
  void need_sweep(uint8_t type) { pending_.kinds |= kind_bit(type); }
  // The flush of `handle`, this Tpm's, did not clearly succeed: the sweep
  // flushes it again by number, and covers its type too (the response that
  // named it may have been forged, the real one elsewhere).
  void need_flush(uint32_t handle);
  bool sweep_pending() const { return !pending_.empty(); }
  // Whether the pending sweep covers handles of `type` (a type, not a kind:
  // HMAC and policy sessions are swept apart).
  bool sweep_pending(uint8_t type) const { return (pending_.kinds & kind_bit(type)) != 0; }
  const Sweep& pending() const { return pending_; }
  // Hands the pending sweep over to be done; give back what is left undone.
  Sweep take_sweep();
  void give_back(Sweep undone);
  void swept() { pending_ = {}; }

  static uint8_t kind_bit(uint8_t type);

 private:
  std::set<uint32_t> owned_;
  std::set<uint32_t> saved_;  // owned sessions context-saved (slots); stale entries cleared by adopt()
  std::set<uint32_t> foreign_;
  bool has_baseline_ = false;
  Sweep pending_;
};

}  // namespace tpmsec

#endif  // TPMSEC_HANDLE_LEDGER_H_
