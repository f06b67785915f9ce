// KDFa and KDFe (TPM 2.0 Part 1 §11.4.10). The only KDF implementations in tpmsec.
#include <openssl/crypto.h>

#include <algorithm>

#include "crypto/hmac.h"
#include "crypto/openssl.h"
#include "tpmsec/crypto.h"
#include "tpmsec/wire.h"

namespace tpmsec::crypto {
namespace {

constexpr uint8_t kLabelTerminator[1] = {0};

// Both KDFs emit ceil(bits / 8) bytes from counter blocks 1, 2, … and then
// keep only the low bits % 8 bits of the first byte (§11.4.10.1).
template <class Block>
Result<SecretBytes> counter_kdf(size_t digest_size, uint32_t bits, Block&& block) {
  const size_t size = (static_cast<size_t>(bits) + 7) / 8;
  SecretBytes out(size);
  uint8_t buffer[internal::kMaxDigestSize];
  for (size_t done = 0, counter = 1; done < size; ++counter) {
    uint8_t counter_be[4];
    store_be32(counter_be, static_cast<uint32_t>(counter));
    Status s = block(ByteView(counter_be), buffer);
    if (!s.ok()) {
      OPENSSL_cleanse(buffer, sizeof(buffer));
      return s.error();
    }
    size_t take = std::min(digest_size, size - done);
    std::copy(buffer, buffer + take, out.data() + done);
    done += take;
  }
  OPENSSL_cleanse(buffer, sizeof(buffer));
  if (bits % 8 != 0) out.data()[0] &= static_cast<uint8_t>((1u << (bits % 8)) - 1);
  return out;
}

// Wipes the last output block, which this thread's digest context still holds.
void scrub_thread_context(uint16_t hash_alg) {
  auto ctx = internal::thread_md_ctx(hash_alg);
  if (ctx.ok()) EVP_MD_CTX_reset(*ctx);  // frees the provider state with OPENSSL_clear_free
}

}  // namespace

Result<SecretBytes> kdfa(uint16_t hash_alg, ByteView key, std::string_view label, ByteView context_u,
                         ByteView context_v, uint32_t bits) {
  internal::HmacState state;
  TPMSEC_RETURN_IF_ERROR(state.init(hash_alg, key));
  uint8_t bits_be[4];
  store_be32(bits_be, bits);
  auto out = counter_kdf(state.digest_size(), bits, [&](ByteView counter, uint8_t* block) {
    return state.mac({counter, as_bytes(label), kLabelTerminator, context_u, context_v, bits_be}, block);
  });
  scrub_thread_context(hash_alg);
  return out;
}

Result<SecretBytes> kdfa(const HmacKey& key, std::string_view label, ByteView context_u, ByteView context_v,
                         uint32_t bits) {
  if (!key.ready()) return usage_error("KDFa under an HMAC key not initialised");
  uint8_t bits_be[4];
  store_be32(bits_be, bits);
  auto out = counter_kdf(key.digest_size(), bits, [&](ByteView counter, uint8_t* block) {
    return key.mac({counter, as_bytes(label), kLabelTerminator, context_u, context_v, bits_be},
                   MutableByteView(block, key.digest_size()));
  });
  scrub_thread_context(key.hash_alg());
  return out;
}

Result<SecretBytes> kdfe(uint16_t hash_alg, ByteView z, std::string_view label, ByteView party_u, ByteView party_v,
                         uint32_t bits) {
  TPMSEC_ASSIGN_OR_RETURN(const EVP_MD* md, internal::md_for(hash_alg));
  TPMSEC_ASSIGN_OR_RETURN(EVP_MD_CTX * ctx, internal::thread_md_ctx(hash_alg));
  auto out = counter_kdf(EVP_MD_get_size(md), bits, [&](ByteView counter, uint8_t* block) -> Status {
    unsigned int size = 0;
    bool ok = EVP_DigestInit_ex2(ctx, md, nullptr) == 1;
    for (ByteView p : {counter, z, as_bytes(label), ByteView(kLabelTerminator), party_u, party_v}) {
      ok = ok && EVP_DigestUpdate(ctx, p.data(), p.size()) == 1;
    }
    ok = ok && EVP_DigestFinal_ex(ctx, block, &size) == 1;
    if (!ok) return internal::openssl_error("KDFe digest");
    return ok_status();
  });
  scrub_thread_context(hash_alg);
  return out;
}

}  // namespace tpmsec::crypto
