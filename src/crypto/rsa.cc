// RSAES-OAEP encryption (RFC 8017 §7.1.1) for salts and secret sharing.
//
// The EME-OAEP encoding is done here so the seed can be pinned for
// known-answer tests (OpenSSL draws it internally); only the raw RSA
// operation is OpenSSL's (EVP_PKEY_encrypt with RSA_NO_PADDING). A random
// seed takes the same path, so the tested code is the code that runs.
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/rsa.h>

#include <algorithm>
#include <string>

#include "crypto/openssl.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/wire.h"

namespace tpmsec::crypto {
namespace {

using internal::openssl_error;

constexpr uint32_t kDefaultExponent = 65537;

// target ^= MGF1(hash, mgf_seed, target.size()) (RFC 8017 §B.2.1).
Status mgf1_xor(EVP_MD_CTX* ctx, const EVP_MD* md, ByteView mgf_seed, MutableByteView target) {
  const size_t digest_size = static_cast<size_t>(EVP_MD_get_size(md));
  uint8_t block[internal::kMaxDigestSize];
  for (uint32_t counter = 0; !target.empty(); ++counter) {
    uint8_t counter_be[4];
    store_be32(counter_be, counter);
    unsigned int size = 0;
    if (EVP_DigestInit_ex2(ctx, md, nullptr) != 1 || EVP_DigestUpdate(ctx, mgf_seed.data(), mgf_seed.size()) != 1 ||
        EVP_DigestUpdate(ctx, counter_be, sizeof(counter_be)) != 1 || EVP_DigestFinal_ex(ctx, block, &size) != 1) {
      OPENSSL_cleanse(block, sizeof(block));
      return openssl_error("MGF1");
    }
    size_t take = std::min(digest_size, target.size());
    for (size_t i = 0; i < take; ++i) target[i] ^= block[i];
    target = target.subspan(take);
  }
  OPENSSL_cleanse(block, sizeof(block));
  return ok_status();
}

// The public key (n, e) as an EVP_PKEY.
Result<internal::PkeyPtr> rsa_public_key(const BIGNUM* n, uint32_t exponent) {
  internal::BnPtr e(BN_new());
  internal::ParamBldPtr builder(OSSL_PARAM_BLD_new());
  if (!e || !builder || BN_set_word(e.get(), exponent) != 1 ||
      OSSL_PARAM_BLD_push_BN(builder.get(), OSSL_PKEY_PARAM_RSA_N, n) != 1 ||
      OSSL_PARAM_BLD_push_BN(builder.get(), OSSL_PKEY_PARAM_RSA_E, e.get()) != 1) {
    return openssl_error("building RSA key parameters");
  }
  internal::ParamsPtr params(OSSL_PARAM_BLD_to_param(builder.get()));
  internal::PkeyCtxPtr ctx(EVP_PKEY_CTX_new_from_name(internal::library_context(), "RSA", nullptr));
  EVP_PKEY* key = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &key, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return openssl_error("importing the RSA public key");
  }
  return internal::PkeyPtr(key);
}

}  // namespace

Result<Bytes> rsa_oaep_encrypt(ByteView modulus, uint32_t exponent, uint16_t hash_alg, std::string_view label,
                               ByteView plaintext, ByteView seed) {
  TPMSEC_ASSIGN_OR_RETURN(const EVP_MD* md, internal::md_for(hash_alg));
  if (exponent == 0) exponent = kDefaultExponent;
  if (exponent < 3 || exponent % 2 == 0) return usage_error("RSA exponent " + std::to_string(exponent) + " is invalid");
  internal::BnPtr n(BN_bin2bn(modulus.data(), static_cast<int>(modulus.size()), nullptr));
  if (!n) return openssl_error("BN_bin2bn");
  const size_t k = static_cast<size_t>(BN_num_bytes(n.get()));
  const size_t h_len = static_cast<size_t>(EVP_MD_get_size(md));
  if (k < 2 * h_len + 2 || plaintext.size() > k - 2 * h_len - 2) {
    return usage_error("RSA-OAEP: " + std::to_string(plaintext.size()) + " bytes do not fit a " +
                       std::to_string(8 * k) + "-bit modulus with " + std::string(hash_name(hash_alg)));
  }
  SecretBytes random_seed;
  if (seed.empty()) {
    random_seed = SecretBytes(h_len);
    TPMSEC_RETURN_IF_ERROR(system_random().fill(random_seed.mutable_view()));
    seed = random_seed.view();
  }
  if (seed.size() != h_len) return usage_error("RSA-OAEP seed must be " + std::to_string(h_len) + " bytes");

  // EM = 00 ‖ maskedSeed ‖ maskedDB, DB = lHash ‖ PS (zeros) ‖ 01 ‖ M.
  static constexpr uint8_t kLabelTerminator[1] = {0};
  TPMSEC_ASSIGN_OR_RETURN(Bytes label_hash,
                          hash(hash_alg, {as_bytes(label), label.empty() ? ByteView() : ByteView(kLabelTerminator)}));
  SecretBytes em(k);
  MutableByteView masked_seed = em.mutable_view().subspan(1, h_len);
  MutableByteView masked_db = em.mutable_view().subspan(1 + h_len);
  std::copy(label_hash.begin(), label_hash.end(), masked_db.begin());
  masked_db[masked_db.size() - plaintext.size() - 1] = 0x01;
  std::copy(plaintext.begin(), plaintext.end(), masked_db.end() - plaintext.size());
  std::copy(seed.begin(), seed.end(), masked_seed.begin());

  // A private digest context: freeing it wipes the last mask block.
  internal::MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) return openssl_error("EVP_MD_CTX_new");
  TPMSEC_RETURN_IF_ERROR(mgf1_xor(ctx.get(), md, seed, masked_db));
  TPMSEC_RETURN_IF_ERROR(mgf1_xor(ctx.get(), md, masked_db, masked_seed));

  // RSAEP: c = EM^e mod n. EM < n because EM's first byte is zero.
  TPMSEC_ASSIGN_OR_RETURN(internal::PkeyPtr key, rsa_public_key(n.get(), exponent));
  internal::PkeyCtxPtr encrypt(EVP_PKEY_CTX_new_from_pkey(internal::library_context(), key.get(), nullptr));
  Bytes ciphertext(k);
  size_t written = ciphertext.size();
  if (!encrypt || EVP_PKEY_encrypt_init(encrypt.get()) != 1 ||
      EVP_PKEY_CTX_set_rsa_padding(encrypt.get(), RSA_NO_PADDING) != 1 ||
      EVP_PKEY_encrypt(encrypt.get(), ciphertext.data(), &written, em.data(), em.size()) != 1) {
    return openssl_error("RSA encryption");
  }
  if (written != k) return runtime_error("RSA encryption returned an unexpected length");
  return ciphertext;
}

}  // namespace tpmsec::crypto
