// Digests: one-shot hash() on a per-thread context, and the incremental Hasher.
#include "crypto/openssl.h"
#include "crypto/sha256.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {

using internal::md_for;
using internal::openssl_error;

Result<size_t> hash_into(uint16_t hash_alg, std::initializer_list<ByteView> parts, MutableByteView out) {
  if (hash_alg == alg::kSha256) {
    if (out.size() < internal::kSha256Bytes) return usage_error("digest buffer smaller than the digest");
    internal::Sha256 h;
    h.update(parts);
    h.finish(out.data());
    return internal::kSha256Bytes;
  }
  TPMSEC_ASSIGN_OR_RETURN(const EVP_MD* md, md_for(hash_alg));
  const auto size = static_cast<size_t>(EVP_MD_get_size(md));
  if (out.size() < size) return usage_error("digest buffer smaller than the digest");
  TPMSEC_ASSIGN_OR_RETURN(EVP_MD_CTX * ctx, internal::thread_md_ctx(hash_alg));
  if (EVP_DigestInit_ex2(ctx, md, nullptr) != 1) return openssl_error("EVP_DigestInit_ex2");
  for (ByteView p : parts) {
    if (EVP_DigestUpdate(ctx, p.data(), p.size()) != 1) return openssl_error("EVP_DigestUpdate");
  }
  unsigned int written = 0;
  if (EVP_DigestFinal_ex(ctx, out.data(), &written) != 1) return openssl_error("EVP_DigestFinal_ex");
  return size;
}

Result<Bytes> hash(uint16_t hash_alg, std::initializer_list<ByteView> parts) {
  uint8_t digest[internal::kMaxDigestSize];
  TPMSEC_ASSIGN_OR_RETURN(size_t size, hash_into(hash_alg, parts, digest));
  return Bytes(digest, digest + size);
}

struct Hasher::State {
  internal::MdCtxPtr ctx;
  const EVP_MD* md = nullptr;
  bool started = false;
  bool failed = false;
};

Hasher::Hasher() : state_(std::make_unique<State>()) {}
Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

Status Hasher::init(uint16_t hash_alg) {
  if (!state_) state_ = std::make_unique<State>();  // a moved-from Hasher may be reused
  state_->started = false;
  state_->failed = true;
  TPMSEC_ASSIGN_OR_RETURN(state_->md, md_for(hash_alg));
  if (!state_->ctx) {
    state_->ctx.reset(EVP_MD_CTX_new());
    if (!state_->ctx) return openssl_error("EVP_MD_CTX_new");
  }
  if (EVP_DigestInit_ex2(state_->ctx.get(), state_->md, nullptr) != 1) return openssl_error("EVP_DigestInit_ex2");
  state_->started = true;
  state_->failed = false;
  return ok_status();
}

void Hasher::update(ByteView data) {
  if (!state_ || !state_->started || state_->failed) return;
  if (EVP_DigestUpdate(state_->ctx.get(), data.data(), data.size()) != 1) state_->failed = true;
}

Result<Bytes> Hasher::finish() {
  if (!state_ || !state_->started) return usage_error("Hasher::finish without a successful init");
  state_->started = false;
  if (state_->failed) return openssl_error("EVP_DigestUpdate");
  Bytes out(EVP_MD_get_size(state_->md));
  unsigned int size = 0;
  if (EVP_DigestFinal_ex(state_->ctx.get(), out.data(), &size) != 1) return openssl_error("EVP_DigestFinal_ex");
  return out;
}

}  // namespace tpmsec::crypto
