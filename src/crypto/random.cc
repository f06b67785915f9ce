// Randomness: the injectable RandomSource and the OpenSSL-backed default.
#include <openssl/rand.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>

#include "crypto/openssl.h"
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {
namespace {

class SystemRandom final : public RandomSource {
 public:
  Status fill(MutableByteView out) override {
    while (!out.empty()) {
      size_t n = std::min<size_t>(out.size(), INT_MAX);
      if (RAND_bytes_ex(internal::library_context(), out.data(), n, 0) != 1) {
        return internal::openssl_error("RAND_bytes");
      }
      out = out.subspan(n);
    }
    return ok_status();
  }
};

// Bumped in every child of fork(): a child must not hand out the nonces its
// parent holds (both would send them).
std::atomic<uint64_t> g_fork_generation{0};
void note_fork_in_child() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

// nonce_random(): RAND_bytes a block at a time, each byte handed out once and
// wiped from the block as it goes. A RAND_bytes call costs about as much for
// 32 bytes as for 1 KiB; a 4 KiB block (128 nonces) costs a nonce ~20 ns of
// it, a 1 KiB one ~60 ns (session_bench's BM_RandBytesBlock). Per thread, so
// no lock; the block is dropped in a forked child and wiped when the thread
// ends.
class NonceRandom final : public RandomSource {
 public:
  NonceRandom() = default;
  NonceRandom(const NonceRandom&) = delete;
  NonceRandom& operator=(const NonceRandom&) = delete;
  ~NonceRandom() override { secure_wipe(block_, sizeof(block_)); }

  Status fill(MutableByteView out) override {
    if (out.size() > kLargest) return system_random().fill(out);
    uint64_t generation = g_fork_generation.load(std::memory_order_relaxed);
    if (generation != generation_) {
      secure_wipe(block_, sizeof(block_));
      used_ = sizeof(block_);
      generation_ = generation;
    }
    if (sizeof(block_) - used_ < out.size()) {
      TPMSEC_RETURN_IF_ERROR(system_random().fill(MutableByteView(block_, sizeof(block_))));
      used_ = 0;
    }
    std::memcpy(out.data(), block_ + used_, out.size());
    secure_wipe(block_ + used_, out.size());
    used_ += out.size();
    return ok_status();
  }

 private:
  static constexpr size_t kLargest = 64;  // a nonce is at most a digest (SHA-512)
  uint8_t block_[4096];
  size_t used_ = sizeof(block_);
  uint64_t generation_ = 0;
};

}  // namespace

RandomSource::~RandomSource() = default;

RandomSource& system_random() {
  static SystemRandom source;
  return source;
}

RandomSource& nonce_random() {
  static const bool registered = [] {
    ::pthread_atfork(nullptr, nullptr, note_fork_in_child);
    return true;
  }();
  (void)registered;
  thread_local NonceRandom source;
  return source;
}

}  // namespace tpmsec::crypto
