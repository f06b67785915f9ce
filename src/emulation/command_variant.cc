// Which modelled variant a traced command is, and how many of its bytes are
// encrypted parameter.
#include "tpmsec/emulation/command_variant.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// One TPMS_AUTH_COMMAND with SHA-256: handle, nonce, attributes, hmac.
constexpr size_t kAuthCommandBytes = 4 + 2 + 32 + 1 + 2 + 32;
// One TPMS_AUTH_RESPONSE with SHA-256: nonce, attributes, hmac.
constexpr size_t kAuthResponseBytes = 2 + 32 + 1 + 2 + 32;

size_t less(size_t a, size_t b) { return a > b ? a - b : 0; }

}  // namespace

std::string variant_of(const CommandShape& shape) {
  std::string name = command_name(shape.command_code);
  switch (shape.command_code) {
    case cc::kStartAuthSession:
      if (!shape.salted) return name + ".unsalted";
      return name + (shape.rsa_salt() ? ".rsa" : ".ecc");
    case cc::kContextLoad:
    case cc::kContextSave:
      return name + (shape.session_context() ? ".session" : ".object");
    case cc::kCreatePrimary: {
      uint16_t type = shape.object_type;
      if (type == alg::kEcc) return name + ".ecc";
      if (type == alg::kRsa) return name + ".rsa";
      return name;
    }
  }
  return name;
}

size_t encrypted_parameter_bytes(const CommandShape& shape) {
  size_t bytes = 0;
  if (shape.session_attributes & attr::kDecrypt) {
    bytes += less(shape.command_bytes, kFrameHeaderBytes + 4 + shape.session_count * kAuthCommandBytes);
  }
  if (shape.session_attributes & attr::kEncrypt) {
    bytes += less(shape.response_bytes, kFrameHeaderBytes + 4 + shape.session_count * kAuthResponseBytes);
  }
  return bytes;
}

}  // namespace tpmsec
