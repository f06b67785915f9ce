// Which modelled variant a traced command is, and how many of its bytes are
// encrypted parameter.
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/latency_model.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

// Salts of 128 bytes or more are RSA (OAEP ciphertext of RSA-2048: 256);
// shorter ones are ECC points (P-256: 2 + 32 + 2 + 32 = 68).
constexpr size_t kRsaSaltMin = 128;

// Handle types (top byte) of HMAC and policy sessions.
bool is_session_handle(uint32_t handle) {
  uint8_t type = static_cast<uint8_t>(handle >> 24);
  return type == 0x02 || type == 0x03;
}

// One TPMS_AUTH_COMMAND with SHA-256: handle, nonce, attributes, hmac.
constexpr size_t kAuthCommandBytes = 4 + 2 + 32 + 1 + 2 + 32;
// One TPMS_AUTH_RESPONSE with SHA-256: nonce, attributes, hmac.
constexpr size_t kAuthResponseBytes = 2 + 32 + 1 + 2 + 32;
constexpr size_t kHeaderBytes = 10;

size_t less(size_t a, size_t b) { return a > b ? a - b : 0; }

}  // namespace

std::string variant_of(const CommandShape& shape) {
  std::string name = command_name(shape.command_code);
  switch (shape.command_code) {
    case cmd::StartAuthSession::kInfo.code:
      if (!shape.salted) return name + ".unsalted";
      return name + (shape.encrypted_salt_bytes >= kRsaSaltMin ? ".rsa" : ".ecc");
    case cmd::ContextLoad::kInfo.code:
    case cmd::ContextSave::kInfo.code:
      return name + (is_session_handle(shape.context_handle) ? ".session" : ".object");
    case cmd::CreatePrimary::kInfo.code: {
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
    bytes += less(shape.command_bytes, kHeaderBytes + 4 + shape.session_count * kAuthCommandBytes);
  }
  if (shape.session_attributes & attr::kEncrypt) {
    bytes += less(shape.response_bytes, kHeaderBytes + 4 + shape.session_count * kAuthResponseBytes);
  }
  return bytes;
}

}  // namespace tpmsec
