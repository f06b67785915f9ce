// Randomness: the injectable RandomSource and the OpenSSL-backed default.
#include <openssl/rand.h>

#include <algorithm>
#include <climits>

#include "crypto/openssl.h"
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {
namespace {

class SystemRandom final : public RandomSource {
 public:
  Status fill(MutableByteView out) override {
    while (!out.empty()) {
      size_t n = std::min<size_t>(out.size(), INT_MAX);
      if (RAND_bytes(out.data(), static_cast<int>(n)) != 1) return internal::openssl_error("RAND_bytes");
      out = out.subspan(n);
    }
    return ok_status();
  }
};

}  // namespace

RandomSource::~RandomSource() = default;

RandomSource& system_random() {
  static SystemRandom source;
  return source;
}

}  // namespace tpmsec::crypto
