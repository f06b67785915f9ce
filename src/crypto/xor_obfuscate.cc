// XOR parameter obfuscation (Part 1 §11.4.6.4 / §21.2).
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {

Status xor_obfuscate(uint16_t hash_alg, ByteView key, ByteView nonce_newer, ByteView nonce_older,
                     MutableByteView data) {
  if (data.size() > UINT32_MAX / 8) return usage_error("XOR obfuscation input too large");
  TPMSEC_ASSIGN_OR_RETURN(SecretBytes mask,
                          kdfa(hash_alg, key, "XOR", nonce_newer, nonce_older, static_cast<uint32_t>(8 * data.size())));
  for (size_t i = 0; i < data.size(); ++i) data[i] ^= mask.data()[i];
  return ok_status();
}

}  // namespace tpmsec::crypto
