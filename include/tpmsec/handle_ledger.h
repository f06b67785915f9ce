// Which TPM handles a Tpm may flush: the bookkeeping of Tpm's handle ledger (the commands it sends for it
// are in tpm.h). tpmsec flushes only what it created. Response handles are covered by no HMAC (Part 1
// §18.9), so a handle a response names proves nothing:
//   owned    handles a parsed response of a creating command (CommandInfo::creates_handle) named,
//            accepted by adopt(), and not flushed or forgotten since;
//   foreign  the baseline: the transient objects and sessions in the TPM before this Tpm's first creating
//            command. Never adopted, never flushed.
// Errors: a response naming an owned or foreign handle, or one of the wrong type, is refused (kIntegrity)
// and the handle is neither adopted nor flushed. A creating command whose outcome is unknown, or a flush of
// an owned handle that did not clearly succeed, leaves a sweep pending: that handle is flushed again by
// number, and the strays (listed, neither owned nor foreign) of the kind the failed command creates are
// flushed. held() is what held_handles.h records for a process that dies.
// Ownership and threads: one ledger per Tpm, one Tpm per TPM connection, whose handles nobody else
// creates while it lives; on /dev/tpmrm* (Transport::private_handles()) no baseline, no sweep. Not
// thread-safe: the Tpm's thread.
// Why, the sweep's kinds, the assumptions and what it does not do: docs/sessions.md, "The handle ledger
// (include/tpmsec/handle_ledger.h)". Tested in tests/tpm/handle_ledger_test.cc and tests/session/leak_test.cc.
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
