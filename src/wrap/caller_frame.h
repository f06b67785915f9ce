// A caller's command frame as the wrapper reads it (wrap.h; its areas read
// by the library's command frame codec, tpmsec/command_frame.h), and the
// frame it sends instead. What the wrapper
// decides from a frame alone, never from a TPM's answer, is here too:
// whether a command can take the wrapper's session, and in which slot.
#ifndef TPMSEC_SRC_WRAP_CALLER_FRAME_H_
#define TPMSEC_SRC_WRAP_CALLER_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/command.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/result.h"
#include "tpmsec/wire.h"

namespace tpmsec::wrapping {

// Frames are bounded here before any byte of them is read; a TPM's own
// limit (TPM_PT_MAX_COMMAND_SIZE) is far below.
inline constexpr size_t kMaxFrame = 65536;
// Session entries in one command (Part 1 §18.5).
inline constexpr size_t kMaxSessions = 3;

using Entry = AuthEntry;  // tpmsec/command_frame.h

// The frame `command` split into its areas; none when it must go out as the
// caller gave it: a
// frame the TPM would refuse anyway (malformed, a session area with no
// session), one with three sessions, or one that needs three of the
// caller's sessions loaded (as entries or as handles: a TPM holds three,
// TPM_PT_HR_LOADED_MIN, none left for the wrapper's).
std::optional<CommandAreas> read_caller_frame(ByteView command);

// Where the wrapper's session goes in a frame: the first password
// authorization's slot, else the first free one.
struct SlotPlan {
  std::optional<size_t> password_slot;
  size_t passwords = 0;         // password entries of the caller's
  bool caller_hmac = false;     // the caller has an HMAC or policy session in it
  bool caller_audits = false;   // ... one of which audits
};
// None when the wrapper's session has no place: an authorization slot the
// caller left empty (the TPM refuses that command as it would have), or an
// audit session of the caller's beside which the wrapper's would carry
// nothing (one session per command may audit, Part 1 §19.6.3).
std::optional<SlotPlan> plan_slot(std::span<const Entry> sessions, const CommandInfo& info);

// The hash of the HMAC session a StartAuthSession asks for when it is
// unsalted and unbound (the caller's sessions the wrapper can re-sign,
// wrap.h); 0 otherwise.
uint16_t unsalted_hmac_session_hash(uint32_t code, std::span<const uint32_t> handles, ByteView parameters);

// GetCapability's response parameters without `handle` when they list
// TPM_CAP_HANDLES holding it (the wrapper's own session, which the caller
// would not see without the wrapper, nor on /dev/tpmrm0 another client's);
// none when they hold no such listing or the handle is not in it.
std::optional<Bytes> listing_without(ByteView parameters, uint32_t handle);

// The command frame: TPM_ST_SESSIONS, the handles, these entries, the
// parameters.
Result<Bytes> build_command_frame(uint32_t code, std::span<const uint32_t> handles, std::span<const ByteView> entries,
                                  ByteView parameters);

}  // namespace tpmsec::wrapping

#endif  // TPMSEC_SRC_WRAP_CALLER_FRAME_H_
