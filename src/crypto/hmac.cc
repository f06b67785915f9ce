// HMAC (RFC 2104); see crypto/hmac.h for why it is built on EVP_MD directly.
#include "crypto/hmac.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {
namespace internal {

HmacKey::~HmacKey() {
  // Only a block's worth was written (the rest is still zero).
  const size_t written = std::min(block_size_, kMaxBlockSize);
  OPENSSL_cleanse(ipad_, written);
  OPENSSL_cleanse(opad_, written);
}

Status HmacKey::init(uint16_t hash_alg, ByteView key) {
  TPMSEC_ASSIGN_OR_RETURN(md_, md_for(hash_alg));
  hash_alg_ = hash_alg;
  block_size_ = static_cast<size_t>(EVP_MD_get_block_size(md_));
  digest_size_ = static_cast<size_t>(EVP_MD_get_size(md_));
  if (block_size_ > kMaxBlockSize || digest_size_ > kMaxDigestSize) {
    return unsupported_error("hash block or digest larger than expected");
  }
  uint8_t hashed_key[kMaxDigestSize];
  if (key.size() > block_size_) {
    TPMSEC_ASSIGN_OR_RETURN(EVP_MD_CTX * ctx, thread_md_ctx(hash_alg));
    unsigned int size = 0;
    if (EVP_DigestInit_ex2(ctx, md_, nullptr) != 1 || EVP_DigestUpdate(ctx, key.data(), key.size()) != 1 ||
        EVP_DigestFinal_ex(ctx, hashed_key, &size) != 1) {
      return openssl_error("hashing the HMAC key");
    }
    key = ByteView(hashed_key, size);
  }
  std::memset(ipad_, 0x36, block_size_);
  std::memset(opad_, 0x5c, block_size_);
  for (size_t i = 0; i < key.size(); ++i) {
    ipad_[i] ^= key[i];
    opad_[i] ^= key[i];
  }
  OPENSSL_cleanse(hashed_key, sizeof(hashed_key));
  if (hash_alg == alg::kSha256) {
    inner_ = Sha256();
    inner_.update(ipad_, kSha256Block);
    outer_ = Sha256();
    outer_.update(opad_, kSha256Block);
  }
  return ok_status();
}

Status HmacKey::mac_sha256(std::initializer_list<ByteView> parts, uint8_t* out) const {
  Sha256 inner = inner_;
  inner.update(parts);
  inner.finish(out);  // inner digest, overwritten below
  Sha256 outer = outer_;
  outer.update(out, kSha256Bytes);
  outer.finish(out);
  return ok_status();
}

Status HmacKey::mac(std::initializer_list<ByteView> parts, uint8_t* out) const {
  if (md_ == nullptr) return usage_error("HMAC key not initialised");
  if (hash_alg_ == alg::kSha256) return mac_sha256(parts, out);
  TPMSEC_ASSIGN_OR_RETURN(EVP_MD_CTX * ctx, thread_md_ctx(hash_alg_));
  unsigned int size = 0;
  bool ok = EVP_DigestInit_ex2(ctx, md_, nullptr) == 1 && EVP_DigestUpdate(ctx, ipad_, block_size_) == 1;
  for (ByteView p : parts) ok = ok && EVP_DigestUpdate(ctx, p.data(), p.size()) == 1;
  ok = ok && EVP_DigestFinal_ex(ctx, out, &size) == 1;  // inner digest, overwritten below
  ok = ok && EVP_DigestInit_ex2(ctx, md_, nullptr) == 1 && EVP_DigestUpdate(ctx, opad_, block_size_) == 1 &&
       EVP_DigestUpdate(ctx, out, digest_size_) == 1 && EVP_DigestFinal_ex(ctx, out, &size) == 1;
  if (!ok) {
    OPENSSL_cleanse(out, digest_size_);
    return openssl_error("HMAC");
  }
  return ok_status();
}

}  // namespace internal

Result<Bytes> hmac(uint16_t hash_alg, ByteView key, std::initializer_list<ByteView> parts) {
  internal::HmacKey hmac_key;
  TPMSEC_RETURN_IF_ERROR(hmac_key.init(hash_alg, key));
  Bytes out(hmac_key.digest_size());
  TPMSEC_RETURN_IF_ERROR(hmac_key.mac(parts, out.data()));
  return out;
}

}  // namespace tpmsec::crypto
