// AES in CFB-128 mode (Part 1 §11.4.6.3 / §21.3) for parameter encryption.
#include <climits>

#include "crypto/openssl.h"
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {
namespace {

constexpr size_t kAesBlockSize = 16;

Status aes_cfb(ByteView key, ByteView iv, MutableByteView data, bool encrypt) {
  const EVP_CIPHER* cipher = internal::aes_cfb_for(key.size());
  if (cipher == nullptr) {
    return usage_error("AES key must be 16, 24 or 32 bytes, not " + std::to_string(key.size()));
  }
  if (iv.size() != kAesBlockSize) return usage_error("AES-CFB IV must be 16 bytes, not " + std::to_string(iv.size()));
  if (data.size() > INT_MAX) return usage_error("AES-CFB input too large");
  if (data.empty()) return ok_status();
  // A fresh context per call: freeing it wipes the key schedule, and the
  // cipher is already fetched, so this costs two small allocations.
  internal::CipherCtxPtr ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return internal::openssl_error("EVP_CIPHER_CTX_new");
  if (EVP_CipherInit_ex2(ctx.get(), cipher, key.data(), iv.data(), encrypt ? 1 : 0, nullptr) != 1) {
    return internal::openssl_error("EVP_CipherInit_ex2");
  }
  int written = 0;  // CFB is a stream mode: in place is allowed and nothing is buffered
  if (EVP_CipherUpdate(ctx.get(), data.data(), &written, data.data(), static_cast<int>(data.size())) != 1 ||
      static_cast<size_t>(written) != data.size()) {
    return internal::openssl_error("EVP_CipherUpdate");
  }
  return ok_status();
}

}  // namespace

Status aes_cfb_encrypt(ByteView key, ByteView iv, MutableByteView data) { return aes_cfb(key, iv, data, true); }
Status aes_cfb_decrypt(ByteView key, ByteView iv, MutableByteView data) { return aes_cfb(key, iv, data, false); }

}  // namespace tpmsec::crypto
