// Internal to src/crypto: RAII owners for OpenSSL objects, the algorithms
// fetched once per process, per-thread digest contexts, and error formatting.
#ifndef TPMSEC_SRC_CRYPTO_OPENSSL_H_
#define TPMSEC_SRC_CRYPTO_OPENSSL_H_

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "tpmsec/result.h"

namespace tpmsec::crypto::internal {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
template <class T, void (*Free)(T*)>
using Owned = std::unique_ptr<T, Deleter<T, Free>>;

using MdCtxPtr = Owned<EVP_MD_CTX, EVP_MD_CTX_free>;
using CipherCtxPtr = Owned<EVP_CIPHER_CTX, EVP_CIPHER_CTX_free>;
using PkeyPtr = Owned<EVP_PKEY, EVP_PKEY_free>;
using PkeyCtxPtr = Owned<EVP_PKEY_CTX, EVP_PKEY_CTX_free>;
using BnPtr = Owned<BIGNUM, BN_clear_free>;  // clear: some hold private scalars
using BnCtxPtr = Owned<BN_CTX, BN_CTX_free>;
using EcPointPtr = Owned<EC_POINT, EC_POINT_clear_free>;
using ParamBldPtr = Owned<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>;
using ParamsPtr = Owned<OSSL_PARAM, OSSL_PARAM_free>;

// Largest digest and block size of the supported hashes (SHA-512).
inline constexpr size_t kMaxDigestSize = 64;
inline constexpr size_t kMaxBlockSize = 128;

// tpmsec's OpenSSL library context (the default provider), for every fetch:
// never the host program's default context, which it may be configuring.
OSSL_LIB_CTX* library_context();

// The fetched EVP_MD for a TPM hash id, or a kUnsupported error.
Result<const EVP_MD*> md_for(uint16_t hash_alg);

// This thread's reusable digest context for `hash_alg` (not re-entrant: the
// caller finishes its digest before calling anything else that uses it).
Result<EVP_MD_CTX*> thread_md_ctx(uint16_t hash_alg);

// The fetched AES-CFB128 cipher for a 16-, 24- or 32-byte key, or nullptr.
const EVP_CIPHER* aes_cfb_for(size_t key_size);

// An error naming the failed operation and OpenSSL's first queued reason;
// drains OpenSSL's error queue.
Error openssl_error(std::string_view what);

}  // namespace tpmsec::crypto::internal

#endif  // TPMSEC_SRC_CRYPTO_OPENSSL_H_
