// A TPM command frame split into its areas (Part 1 §18.2-§18.5): the handle
// area (as many handles as the command table says), the authorization area's
// session entries, the parameters. Read from bytes that may be hostile: the
// header checked first (frame_header.h), every size bounded by the frame,
// nothing past it read. What an intermediary reads of a client's frame (the
// TCTI's CommandWrapper, the emulator's per-client session slots, the
// tracing); and the one writer of a command frame (Tpm::execute, the
// wrapper). The response's side is response_frame.h.
#ifndef TPMSEC_COMMAND_FRAME_H_
#define TPMSEC_COMMAND_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/command.h"
#include "tpmsec/result.h"
#include "tpmsec/wire.h"

namespace tpmsec {

// TPMS_AUTH_COMMAND (handle set) or TPMS_AUTH_RESPONSE (handle 0), as views
// of the frame it came in.
struct AuthEntry {
  uint32_t handle = 0;
  ByteView nonce;
  uint8_t attributes = 0;
  ByteView hmac;
  ByteView raw;  // the whole entry
};
// One entry at `r` (of `frame`); r fails on a short or oversized one.
AuthEntry read_auth_entry(Reader& r, ByteView frame, bool command);
// The entry's bytes (`raw` is not read): TPMS_AUTH_COMMAND with its handle
// when `command`, else TPMS_AUTH_RESPONSE. kUsage when the nonce or the hmac
// is longer than a digest (64 bytes).
Result<Bytes> write_auth_entry(const AuthEntry& entry, bool command);

struct CommandAreas {
  const CommandInfo* info = nullptr;  // the command table's entry
  std::vector<uint32_t> handles;
  std::vector<AuthEntry> sessions;  // empty: TPM_ST_NO_SESSIONS
  ByteView parameters;
};

// The areas of `frame` (a whole command, its size as its header says, at
// most `max_size`). kParse when the header, an area or an entry does not fit,
// when the authorization area holds more than `max_sessions` entries, or when
// a session area holds none; kUnsupported for a code the table does not know
// (its handle area cannot be told).
Result<CommandAreas> read_command_areas(ByteView frame, size_t max_size, size_t max_sessions = 3);

// A command frame: TPM_ST_SESSIONS and an authorization area of these
// entries (each a whole TPMS_AUTH_COMMAND, write_auth_entry()), or
// TPM_ST_NO_SESSIONS and none when there are none; the handles, the
// parameters. Sizes are the Writer's (wire.h): kUsage when the frame would
// pass `max_size`, nothing written.
Result<Bytes> write_command_frame(uint32_t code, std::span<const uint32_t> handles, std::span<const ByteView> sessions,
                                  ByteView parameters, size_t max_size);

}  // namespace tpmsec

#endif  // TPMSEC_COMMAND_FRAME_H_
