// HMAC (RFC 2104); see crypto/hmac.h for why it is built on EVP_MD directly.
#include "crypto/hmac.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {
namespace internal {

HmacState::~HmacState() { wipe(); }

void HmacState::wipe() {
  // Only a block's worth was written (the rest is still zero).
  const size_t written = std::min(block_size_, kMaxBlockSize);
  OPENSSL_cleanse(ipad_, written);
  OPENSSL_cleanse(opad_, written);
  inner_ = Sha256();
  outer_ = Sha256();
  md_ = nullptr;
  hash_alg_ = 0;
  block_size_ = digest_size_ = 0;
}

Status HmacState::init(uint16_t hash_alg, ByteView key) {
  wipe();  // a re-key keeps nothing of the last key, and a failed one leaves no key
  TPMSEC_ASSIGN_OR_RETURN(const EVP_MD* md, md_for(hash_alg));
  const auto block_size = static_cast<size_t>(EVP_MD_get_block_size(md));
  const auto digest_size = static_cast<size_t>(EVP_MD_get_size(md));
  if (block_size > kMaxBlockSize || digest_size > kMaxDigestSize) {
    return unsupported_error("hash block or digest larger than expected");
  }
  uint8_t hashed_key[kMaxDigestSize];
  if (key.size() > block_size) {
    TPMSEC_ASSIGN_OR_RETURN(size_t size, hash_into(hash_alg, {key}, hashed_key));
    key = ByteView(hashed_key, size);
  }
  std::memset(ipad_, 0x36, block_size);
  std::memset(opad_, 0x5c, block_size);
  for (size_t i = 0; i < key.size(); ++i) {
    ipad_[i] ^= key[i];
    opad_[i] ^= key[i];
  }
  OPENSSL_cleanse(hashed_key, sizeof(hashed_key));
  if (hash_alg == alg::kSha256) {
    inner_.update(ipad_, kSha256Block);
    outer_.update(opad_, kSha256Block);
  }
  md_ = md;
  hash_alg_ = hash_alg;
  block_size_ = block_size;
  digest_size_ = digest_size;
  return ok_status();
}

Status HmacState::mac_sha256(std::initializer_list<ByteView> parts, uint8_t* out) const {
  // One working state for both passes: the outer state overwrites the spent
  // inner one whole, and a single wipe (the destructor) follows.
  Sha256 h = inner_;
  h.update(parts);
  h.finish(out);  // inner digest, overwritten below
  h = outer_;
  h.update(out, kSha256Bytes);
  h.finish(out);
  return ok_status();
}

Status HmacState::mac(std::initializer_list<ByteView> parts, uint8_t* out) const {
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
  internal::HmacState state;
  TPMSEC_RETURN_IF_ERROR(state.init(hash_alg, key));
  Bytes out(state.digest_size());
  TPMSEC_RETURN_IF_ERROR(state.mac(parts, out.data()));
  return out;
}

HmacKey::HmacKey() = default;
HmacKey::~HmacKey() = default;  // the state wipes itself
HmacKey::HmacKey(HmacKey&&) noexcept = default;
HmacKey& HmacKey::operator=(HmacKey&&) noexcept = default;

Status HmacKey::init(uint16_t hash_alg, ByteView key) {
  if (!state_) state_ = std::make_unique<internal::HmacState>();
  return state_->init(hash_alg, key);
}

bool HmacKey::ready() const { return state_ && state_->ready(); }

uint16_t HmacKey::hash_alg() const { return ready() ? state_->hash_alg() : 0; }

size_t HmacKey::digest_size() const { return ready() ? state_->digest_size() : 0; }

Status HmacKey::mac(std::initializer_list<ByteView> parts, MutableByteView out) const {
  if (!ready()) return usage_error("HMAC key not initialised");
  if (out.size() < state_->digest_size()) return usage_error("HMAC output buffer smaller than the digest");
  return state_->mac(parts, out.data());
}

}  // namespace tpmsec::crypto
