// Internal to src/crypto: SHA-256, the hash of every session tpmsec starts,
// through OpenSSL's low-level API. The per-command digests (cpHash, rpHash,
// both HMACs) are short; through EVP each paid a provider context freed and
// re-created by EVP_DigestInit_ex2 (a malloc) and the dispatch of every call,
// about as much as the hashing itself (docs/performance.md). The state here
// is a plain struct on the stack: no allocation, the same SHA-NI code.
#ifndef TPMSEC_SRC_CRYPTO_SHA256_H_
#define TPMSEC_SRC_CRYPTO_SHA256_H_

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <initializer_list>

#include "tpmsec/bytes.h"

namespace tpmsec::crypto::internal {

// SHA256_Init/Update/Final are deprecated in OpenSSL 3.0 in favour of EVP,
// not removed; this class is their one user. (A pragma, not
// OPENSSL_SUPPRESS_DEPRECATED: in a unity batch another file's OpenSSL
// header may come first.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

inline constexpr size_t kSha256Bytes = 32;
inline constexpr size_t kSha256Block = 64;

class Sha256 {
 public:
  Sha256() { SHA256_Init(&ctx_); }
  ~Sha256() { OPENSSL_cleanse(&ctx_, sizeof(ctx_)); }  // it may have absorbed a key
  Sha256(const Sha256& other) : ctx_(other.ctx_) {}
  Sha256& operator=(const Sha256& other) {
    ctx_ = other.ctx_;
    return *this;
  }

  void update(const void* data, size_t size) { SHA256_Update(&ctx_, data, size); }
  void update(std::initializer_list<ByteView> parts) {
    for (ByteView p : parts) update(p.data(), p.size());
  }
  // Writes 32 bytes; the state is spent.
  void finish(uint8_t* out) { SHA256_Final(out, &ctx_); }

 private:
  SHA256_CTX ctx_;
};
#pragma GCC diagnostic pop

}  // namespace tpmsec::crypto::internal

#endif  // TPMSEC_SRC_CRYPTO_SHA256_H_
