// The emulated chip's session and object slots (issue #11): SlotLimitTransport, a transport decorator that
// answers as a chip with the profile's SlotLimits would, where those are lower than the wrapped TPM's own
// (libtpms's limits stay in force anyway: every command not refused still runs on it). It enforces TPM 2.0
// Part 1 §30 ("Context Management") as the reference implementation does (Part 4, Session.c):
// TPM_RC_SESSION_MEMORY, TPM_RC_CONTEXT_GAP and TPM_RC_SESSION_HANDLES on StartAuthSession, ContextLoad and
// ContextSave of sessions, TPM_RC_OBJECT_MEMORY on every command that loads a transient object.
// Errors: a refused command is answered without reaching the wrapped TPM, as a 10-byte error response;
// malformed commands are passed through untouched. A refusal is decided before the TPM looks at the rest
// of the command, so a command also wrong in another way gets the slot error first.
// State: which handles are loaded, saved or transient is what the wrapped TPM lists (GetCapability(
// TPM_CAP_HANDLES), sent to it directly before each command that could be refused), so nothing can make
// the count drift; the context counter and the oldest saved session come from the session ContextSaves it
// forwarded. Borrows the wrapped transport (the caller keeps it alive). Deterministic; not thread-safe.
// The table of refusals, the gap's arithmetic and why: docs/latency-profiles.md, "Slots and the context
// gap: what the emulator enforces", and its subsection "The rules, command by command".
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
