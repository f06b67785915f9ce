// Which modelled variant a traced TPM command is, and how many of its bytes
// are encrypted parameter: what the latency model (latency_model.h) prices a
// command by, read from its shape (tracing.h).
#ifndef TPMSEC_EMULATION_COMMAND_VARIANT_H_
#define TPMSEC_EMULATION_COMMAND_VARIANT_H_

#include <cstddef>
#include <string>

#include "tpmsec/transport/tracing.h"

namespace tpmsec {

// The variant a command is modelled as:
//   StartAuthSession.unsalted / .ecc / .rsa  (salted: encryptedSalt of 128
//                                             bytes or more is RSA, e.g. 256;
//                                             shorter is ECC, e.g. 68)
//   ContextLoad.session / .object            (savedHandle top byte 0x02/0x03
//   ContextSave.session / .object             is a session, else an object)
//   CreatePrimary.ecc / .rsa                  (the shape's object_type; other
//                                             or unreadable types: "CreatePrimary")
//   otherwise the command's name ("PCR_Extend", or hex for unknown codes).
std::string variant_of(const CommandShape& shape);

// Approximate bytes of encrypted parameter in a command (decrypt attribute)
// and its response (encrypt attribute): the byte counts less the header and
// one SHA-256 authorization envelope per session (handles are not
// subtracted), so an upper bound on the parameter sizes.
size_t encrypted_parameter_bytes(const CommandShape& shape);

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_COMMAND_VARIANT_H_
