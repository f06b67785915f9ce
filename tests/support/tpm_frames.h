// TPM command and response frames as an interposer on the bus sees them
// (Part 1 §18): split into header, handle area, authorization area and
// parameters, and put back together, so a test can rewrite one field and
// re-frame the rest. Parsing goes through the library's frame codec
// (tpmsec/command_frame.h, tpmsec/response_frame.h: every size bounded, the
// first failure reported); building through its Writer, as an attacker
// would, without the codec's limits (a forged entry may be oversized).
//
// Handle counts come from the command table (tpmsec/command_table.h): a code
// not in it (unassigned, vendor) has no known handle area and is refused.
#ifndef TPMSEC_TESTS_SUPPORT_TPM_FRAMES_H_
#define TPMSEC_TESTS_SUPPORT_TPM_FRAMES_H_

#include <cstdint>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/command.h"
#include "tpmsec/result.h"

namespace tpmsec::testing {

// TPMS_AUTH_COMMAND (handle set) or TPMS_AUTH_RESPONSE (handle 0).
struct SessionEntry {
  uint32_t handle = 0;
  Bytes nonce;
  uint8_t attributes = 0;
  Bytes hmac;
};

struct CommandFrame {
  uint32_t code = 0;
  std::vector<uint32_t> handles;
  std::vector<SessionEntry> sessions;  // empty: TPM_ST_NO_SESSIONS
  Bytes parameters;
};

// A command of a known code; every byte must belong to a field.
Result<CommandFrame> parse_command(ByteView bytes);
// The frame marshalled, tag and size computed.
Bytes build_command(const CommandFrame& frame);
// A command under the password session (empty password), as a client that
// needs no session of its own sends it.
Bytes password_command(uint32_t code, std::vector<uint32_t> handles, Bytes parameters);

struct ResponseFrame {
  uint32_t code = 0;  // response code
  std::vector<uint32_t> handles;
  Bytes parameters;
  std::vector<SessionEntry> sessions;  // empty: TPM_ST_NO_SESSIONS
};

// The response to a command of code `command_code`. An error response is
// just a header (code set, nothing else).
Result<ResponseFrame> parse_response(ByteView bytes, uint32_t command_code);
// The frame marshalled; an error code gives the bare 10-byte header.
Bytes build_response(const ResponseFrame& frame);

// The response code in a response's header (0 when shorter than a header).
uint32_t response_code_of(ByteView response);

// The password session's response entry (Part 1 §19.6.5): empty nonce,
// continueSession, empty hmac.
SessionEntry password_response_entry();

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_TPM_FRAMES_H_
