// The emulated chip's session and object slots (issue #11): a transport
// decorator that answers as a chip with the profile's SlotLimits would, where
// those are lower than the wrapped TPM's own (libtpms's limits stay in force
// anyway, since every command that is not refused still runs on it).
//
// What it enforces, as TPM 2.0 Part 1 §30 ("Context Management") and the
// reference implementation (Part 4, Session.c: SessionCreate,
// ContextIdSessionCreate, SessionContextSave, SessionContextLoad) do:
//
//   StartAuthSession  TPM_RC_SESSION_MEMORY  no free loaded-session slot
//                     TPM_RC_CONTEXT_GAP     a saved session exists, this would
//                                            take the last free slot, and the
//                                            gap is at its maximum
//                     TPM_RC_SESSION_HANDLES active (loaded + saved) sessions
//                                            at active_sessions_max
//   ContextLoad       TPM_RC_SESSION_MEMORY  (a saved session) no free slot
//                     TPM_RC_CONTEXT_GAP     the last free slot, gap at its
//                                            maximum, and not the oldest
//                     TPM_RC_OBJECT_MEMORY   (an object) no free object slot
//   ContextSave       TPM_RC_CONTEXT_GAP     (a session) the gap is at its
//                                            maximum: the context counter's
//                                            low bits equal the oldest saved
//                                            session's
//   CreatePrimary, Load, LoadExternal, CreateLoaded, HashSequenceStart,
//   HMAC_Start        TPM_RC_OBJECT_MEMORY   no free transient-object slot
//
// The gap: the chip keeps a 64-bit context counter, starting at
// max_loaded_sessions + 1 after a TPM Reset; each session ContextSave takes
// its value and increments it; a saved session is remembered by the counter's
// value modulo context_gap_max + 1 ("low bits"), and when those wrap to 0 the
// counter skips the max_loaded_sessions + 1 values that mark a free or loaded
// slot. The gap is at its maximum when the counter's low bits equal the
// oldest saved session's. So with context_gap_max 255 and 3 loaded slots, 251
// more sessions can be saved after one that is kept saved; the 252nd
// ContextSave is refused until the oldest is loaded or flushed.
//
// Which handles are loaded, saved or transient is what the wrapped TPM lists
// (GetCapability(TPM_CAP_HANDLES), sent to it directly before each command
// that could be refused), so FlushContext, continueSession = 0, a TPM Reset or
// Restart and odd or hostile commands need no parsing here and cannot make the
// count drift. What only the chip knows, the context counter and which saved
// session is oldest, comes from the successful session ContextSaves it
// forwarded (a saved session it did not see saved is never taken for the
// oldest). A refused command is answered without reaching the wrapped TPM, as
// a 10-byte error response. Malformed commands are passed through untouched.
// A refusal is decided before the TPM looks at the rest of the command, so a
// command that is also wrong in another way gets the slot error where a chip
// might report that other error first.
// Deterministic; not thread-safe.
#ifndef TPMSEC_EMULATION_SLOT_LIMITS_H_
#define TPMSEC_EMULATION_SLOT_LIMITS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/transport.h"

namespace tpmsec {

class SlotLimitTransport final : public TransportDecorator {
 public:
  SlotLimitTransport(Transport& inner, SlotLimits limits);

  Result<Bytes> transmit(ByteView command) override;
  // A TPM Reset also resets the context counter.
  Status reset_tpm() override;
  Status suspend_resume() override { return inner().suspend_resume(); }

  // The limits in force here (0: not enforced here, the wrapped TPM's own
  // apply), known once a command that could be refused was seen.
  const SlotLimits& enforced() const { return enforced_; }
  // Commands refused, in total and per response code.
  uint64_t refusals() const { return refusals_; }
  uint64_t refusals(uint32_t code) const;
  // The chip's context counter (for tests).
  uint64_t context_counter() const { return counter_; }

 private:
  struct Usage {
    std::vector<uint32_t> loaded;   // loaded sessions (0x02…)
    std::vector<uint32_t> saved;    // saved sessions (0x02… or 0x03…)
    std::vector<uint32_t> objects;  // transient objects (0x80…)
  };
  // Reads the wrapped TPM's own limits once; false while it cannot answer.
  bool learn_limits();
  Result<std::vector<uint32_t>> list(uint32_t first);
  Result<Usage> usage(bool sessions, bool objects);
  // The response code to refuse `command` with, or 0 to forward it.
  uint32_t decide(ByteView command);
  // After a forwarded command's response: the context counter.
  void observe(ByteView command, ByteView response);
  // The oldest saved session among `saved`, by the counter value it was
  // saved at (only sessions this decorator saw saved).
  std::optional<std::pair<uint32_t, uint64_t>> oldest(const std::vector<uint32_t>& saved) const;
  bool gap_at_max(const std::vector<uint32_t>& saved) const;
  uint64_t counter_start() const;

  SlotLimits profile_;
  SlotLimits enforced_;
  bool learned_ = false;
  uint32_t loaded_max_ = 0;  // the loaded-session slots in force (profile's or the wrapped TPM's)
  uint64_t counter_ = 0;
  std::map<uint32_t, uint64_t> saved_at_;  // session slot -> counter value when saved
  uint64_t refusals_ = 0;
  std::map<uint32_t, uint64_t> refused_;
};

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_SLOT_LIMITS_H_
