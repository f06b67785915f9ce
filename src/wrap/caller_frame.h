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
#include <string>
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
  size_t passwords = 0;        // password entries of the caller's
  bool caller_hmac = false;    // the caller has an HMAC or policy session in it
  bool caller_audits = false;  // ... one of which audits
};
// None when the wrapper's session has no place: an authorization slot the
// caller left empty (the TPM refuses that command as it would have), or an
// audit session of the caller's beside which the wrapper's would carry
// nothing (one session per command may audit, Part 1 §19.6.3).
std::optional<SlotPlan> plan_slot(std::span<const Entry> sessions, const CommandInfo& info);

// The hash of the HMAC or policy session a StartAuthSession asks for when
// it is unsalted and unbound: its sessionKey is empty, so its HMAC key is
// the authValue the command uses, if any (the caller's sessions the wrapper
// can re-sign, wrap.h); 0 otherwise.
uint16_t computable_session_hash(uint32_t code, std::span<const uint32_t> handles, ByteView parameters);

// GetCapability's response parameters without `handle` when they list
// TPM_CAP_HANDLES holding it (the wrapper's own session, which the caller
// would not see without the wrapper, nor on /dev/tpmrm0 another client's);
// none when they hold no such listing or the handle is not in it.
std::optional<Bytes> listing_without(ByteView parameters, uint32_t handle);

// Strict mode (wrap.h): why `command`'s secret would cross the bus in clear
// when it goes out with these choices, or empty when none would. Secrets:
// a non-empty password left in a password entry, and the first parameter
// of the commands whose first command or response parameter is secret
// (secret_first_parameters() below) unless a session encrypts it: the
// wrapper's (`decrypt`, `encrypt`) or one of the caller's own (its decrypt
// or encrypt attribute). A command parameter whose bytes are all zero (an
// empty sensitive area, no data) carries no secret. `replaced_password`: the
// password slot the wrapper's session took, if any.
std::string secret_in_clear(const CommandInfo& info, std::span<const Entry> sessions, ByteView parameters,
                            std::optional<size_t> replaced_password, bool decrypt, bool encrypt);

// Which first parameters of a command are secrets (the list strict mode
// refuses in clear; docs/tcti.md): Part 3's sensitive areas, authValues,
// private keys, unsealed and NV data, random bytes, shared secrets,
// plaintexts of encryption and decryption.
struct SecretParameters {
  bool command = false;
  bool response = false;
};
SecretParameters secret_first_parameters(uint32_t code);

}  // namespace tpmsec::wrapping

#endif  // TPMSEC_SRC_WRAP_CALLER_FRAME_H_
