// A TPM command frame split into its areas (Part 1 §18.2-§18.5): the handle
// area (as many handles as the command table says), the authorization area's
// session entries, the parameters. Read from bytes that may be hostile: the
// header checked first (frame_header.h), every size bounded by the frame,
// nothing past it read. What an intermediary reads of a client's frame (the
// TCTI's CommandWrapper, the emulator's per-client session slots).
#ifndef TPMSEC_COMMAND_FRAME_H_
#define TPMSEC_COMMAND_FRAME_H_

#include <cstddef>
#include <cstdint>
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

struct CommandAreas {
  const CommandInfo* info = nullptr;  // the command table's entry
  std::vector<uint32_t> handles;
  std::vector<AuthEntry> sessions;    // empty: TPM_ST_NO_SESSIONS
  ByteView parameters;
};

// The areas of `frame` (a whole command, its size as its header says, at
// most `max_size`). kParse when the header, an area or an entry does not fit,
// when the authorization area holds more than `max_sessions` entries, or when
// a session area holds none; kUnsupported for a code the table does not know
// (its handle area cannot be told).
Result<CommandAreas> read_command_areas(ByteView frame, size_t max_size, size_t max_sessions = 3);

}  // namespace tpmsec

#endif  // TPMSEC_COMMAND_FRAME_H_
