#include <openssl/crypto.h>

#include "tpmsec/crypto.h"

namespace tpmsec::crypto {

bool constant_time_equal(ByteView a, ByteView b) {
  // The length is not secret; only the contents are compared in constant time.
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tpmsec::crypto
