// Algorithms fetched once per process; per-thread digest contexts.
//
// EVP_*_fetch costs about as much as hashing a short message, and implicit
// fetches (EVP_sha256() passed to an init) repeat it on every call, so each
// algorithm is fetched once here and every call reuses it.
#include "crypto/openssl.h"

#include <openssl/err.h>
#include <openssl/provider.h>

#include <array>
#include <cstdio>
#include <string>

#include "tpmsec/constants.h"

namespace tpmsec::crypto::internal {
namespace {

using MdPtr = Owned<EVP_MD, EVP_MD_free>;
using CipherPtr = Owned<EVP_CIPHER, EVP_CIPHER_free>;

// Index of a supported hash in the tables below, or -1.
int hash_index(uint16_t hash_alg) {
  switch (hash_alg) {
    case alg::kSha1:
      return 0;
    case alg::kSha256:
      return 1;
    case alg::kSha384:
      return 2;
    case alg::kSha512:
      return 3;
    case alg::kSm3_256:
      return 4;  // PCR banks of Chinese-market TPMs
    default:
      return -1;
  }
}
constexpr size_t kHashCount = 5;

// tpmsec's own library context with OpenSSL's default provider: the
// program tpmsec runs in (the TCTI is loaded into any tpm2-tss program) may
// have configured its default context otherwise, or be loading its
// providers right now — tpm2-openssl's provider opens its TCTI from its own
// initialization, before `-provider default` is active.
struct LibraryContext {
  OSSL_LIB_CTX* ctx = OSSL_LIB_CTX_new();
  OSSL_PROVIDER* provider = ctx ? OSSL_PROVIDER_load(ctx, "default") : nullptr;
  // Never freed: OpenSSL's own exit handler may run before ours, and a
  // program's exit handlers (a TCTI's finalize) may still use the algorithms.
};

struct Algorithms {
  std::array<MdPtr, kHashCount> md;
  CipherPtr aes128_cfb, aes192_cfb, aes256_cfb;

  Algorithms() {
    static constexpr const char* kMdNames[kHashCount] = {"SHA1", "SHA2-256", "SHA2-384", "SHA2-512", "SM3"};
    OSSL_LIB_CTX* ctx = library_context();
    for (size_t i = 0; i < kHashCount; ++i) md[i].reset(EVP_MD_fetch(ctx, kMdNames[i], nullptr));
    aes128_cfb.reset(EVP_CIPHER_fetch(ctx, "AES-128-CFB", nullptr));
    aes192_cfb.reset(EVP_CIPHER_fetch(ctx, "AES-192-CFB", nullptr));
    aes256_cfb.reset(EVP_CIPHER_fetch(ctx, "AES-256-CFB", nullptr));
    ERR_clear_error();  // a missing algorithm is reported when it is used
  }
};

const Algorithms& algorithms() {
  static const Algorithms algs;
  return algs;
}

Error unsupported_hash(uint16_t hash_alg) {
  char id[8];
  std::snprintf(id, sizeof(id), "0x%04x", hash_alg);
  return unsupported_error(std::string("hash algorithm ") + id + " is not supported");
}

}  // namespace

OSSL_LIB_CTX* library_context() {
  static const LibraryContext* context = new LibraryContext();
  return context->ctx;
}

Result<const EVP_MD*> md_for(uint16_t hash_alg) {
  int i = hash_index(hash_alg);
  if (i < 0) return unsupported_hash(hash_alg);
  const EVP_MD* md = algorithms().md[i].get();
  if (md == nullptr) return unsupported_error(std::string(hash_name(hash_alg)) + " is not available in OpenSSL");
  return md;
}

Result<EVP_MD_CTX*> thread_md_ctx(uint16_t hash_alg) {
  // One context per hash so switching algorithms does not reallocate.
  thread_local std::array<MdCtxPtr, kHashCount> contexts;
  int i = hash_index(hash_alg);
  if (i < 0) return unsupported_hash(hash_alg);
  if (!contexts[i]) {
    contexts[i].reset(EVP_MD_CTX_new());
    if (!contexts[i]) return openssl_error("EVP_MD_CTX_new");
  }
  return contexts[i].get();
}

const EVP_CIPHER* aes_cfb_for(size_t key_size) {
  switch (key_size) {
    case 16:
      return algorithms().aes128_cfb.get();
    case 24:
      return algorithms().aes192_cfb.get();
    case 32:
      return algorithms().aes256_cfb.get();
    default:
      return nullptr;
  }
}

Error openssl_error(std::string_view what) {
  std::string message(what);
  unsigned long code = ERR_get_error();
  if (code != 0) {
    char reason[256];
    ERR_error_string_n(code, reason, sizeof(reason));
    message += " failed: ";
    message += reason;
  } else {
    message += " failed";
  }
  ERR_clear_error();
  return runtime_error(std::move(message));
}

}  // namespace tpmsec::crypto::internal
