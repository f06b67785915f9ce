// The cryptography a TPM session needs, on OpenSSL 3 (namespace tpmsec::crypto).
//
// Contracts shared by every function here:
// - Hash algorithms are TPM_ALG_IDs (alg::kSha1, kSha256, kSha384, kSha512);
//   any other id fails with kUnsupported.
// - OpenSSL algorithms are fetched once per process and per-thread contexts are
//   reused, so the per-command primitives (hash, hmac, kdfa) cost well under a
//   microsecond each and are safe to call from several threads.
// - Nothing throws; every fallible call returns Status or Result.
// - Key material that is returned is SecretBytes; intermediate secrets are wiped.
#ifndef TPMSEC_CRYPTO_H_
#define TPMSEC_CRYPTO_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string_view>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::crypto {

// ---- Hashing (Part 1 §11.4.2) ----

// H(parts[0] ‖ parts[1] ‖ …).
Result<Bytes> hash(uint16_t hash_alg, std::initializer_list<ByteView> parts);
// The same into `out` (at least the digest's size), allocating nothing;
// returns the digest's size.
Result<size_t> hash_into(uint16_t hash_alg, std::initializer_list<ByteView> parts, MutableByteView out);

// Incremental hashing for inputs built piece by piece (cpHash over large
// parameter areas). Errors from init/update are kept and reported by finish().
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;

  // Starts (or restarts) a digest with `hash_alg`.
  Status init(uint16_t hash_alg);
  void update(ByteView data);
  // The digest; the Hasher must be init()ed again before reuse.
  Result<Bytes> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// HMAC (RFC 2104) of parts[0] ‖ parts[1] ‖ … under `key`. Any key length is
// accepted, including empty (which equals the key 00, as the TPM uses it).
Result<Bytes> hmac(uint16_t hash_alg, ByteView key, std::initializer_list<ByteView> parts);

namespace internal {
class HmacState;
}

// An HMAC key prepared once: init() hashes the padded key's two blocks, and
// each mac() starts from those states, so it hashes only its message and the
// inner digest. What a session keeps between commands (its key changes only
// with the authValue). The states are wiped when re-keyed or destroyed.
class HmacKey {
 public:
  HmacKey();
  ~HmacKey();
  HmacKey(HmacKey&&) noexcept;
  HmacKey& operator=(HmacKey&&) noexcept;

  // (Re)keys, any key length as for hmac(). On failure the key is unset.
  Status init(uint16_t hash_alg, ByteView key);
  bool ready() const;
  uint16_t hash_alg() const;   // 0 until init() succeeded
  size_t digest_size() const;  // 0 until init() succeeded
  // Writes digest_size() bytes of HMAC(key, parts…) to out, which must hold them.
  Status mac(std::initializer_list<ByteView> parts, MutableByteView out) const;

 private:
  std::unique_ptr<internal::HmacState> state_;
};

// ---- Key derivation (Part 1 §11.4.10) ----

// KDFa (§11.4.10.2): counter-mode KDF with HMAC. Output block i (from 1) is
//   HMAC(key, BE32(i) ‖ label ‖ 00 ‖ context_u ‖ context_v ‖ BE32(bits)).
// `label` is given without its terminating NUL (one 00 is appended). Returns
// ceil(bits / 8) bytes; when bits % 8 != 0 the first byte keeps only its low
// bits % 8 bits. An empty key is allowed.
Result<SecretBytes> kdfa(uint16_t hash_alg, ByteView key, std::string_view label, ByteView context_u,
                         ByteView context_v, uint32_t bits);
// The same under a prepared key (its hash and key).
Result<SecretBytes> kdfa(const HmacKey& key, std::string_view label, ByteView context_u, ByteView context_v,
                         uint32_t bits);

// KDFe (§11.4.10.3): the concatenation KDF of SP800-56A. Output block i is
//   H(BE32(i) ‖ z ‖ label ‖ 00 ‖ party_u ‖ party_v);
// length and masking as for kdfa.
Result<SecretBytes> kdfe(uint16_t hash_alg, ByteView z, std::string_view label, ByteView party_u, ByteView party_v,
                         uint32_t bits);

// ---- Parameter encryption (Part 1 §21) ----

// AES in CFB-128 mode, in place. The key length picks AES-128/192/256; the
// IV must be 16 bytes. Any data length is allowed (CFB needs no padding).
Status aes_cfb_encrypt(ByteView key, ByteView iv, MutableByteView data);
Status aes_cfb_decrypt(ByteView key, ByteView iv, MutableByteView data);

// XOR obfuscation (§21.2): data ^= KDFa(hash_alg, key, "XOR", nonce_newer,
// nonce_older, 8 * data.size()). Its own inverse.
Status xor_obfuscate(uint16_t hash_alg, ByteView key, ByteView nonce_newer, ByteView nonce_older, MutableByteView data);

// ---- Randomness ----

// A source of random bytes, injectable so derivations can be replayed in tests.
class RandomSource {
 public:
  virtual ~RandomSource();
  // Fills `out` entirely or fails.
  virtual Status fill(MutableByteView out) = 0;
};

// The process-wide source backed by OpenSSL's RAND_bytes.
RandomSource& system_random();

// For nonces only (nonceCaller: public once sent, unpredictable until then):
// RAND_bytes drawn a 4 KiB block at a time and handed out once each, so a
// command's nonce costs a copy, not a RAND_bytes call (~2 µs here). The
// calling thread's own source; a forked child never reuses its parent's
// block. Never for keys or secrets: those come from system_random().
RandomSource& nonce_random();

// ---- ECC (Part 1 §C.6, Part 2 §11.2.5) ----

// TPM_ECC_NIST_P521 (the project's constants stop at P-384).
inline constexpr uint16_t kCurveNistP521 = 0x0005;

// An affine point, coordinates fixed-size big-endian (32 bytes for P-256).
struct EccPoint {
  Bytes x, y;
};

// Coordinate size in bytes of a supported curve (P-256, P-384, P-521), or 0.
size_t ecc_coordinate_size(uint16_t tpm_curve);

// Fails (kIntegrity) unless `point` is a valid public point of `tpm_curve`:
// coordinates below the field prime, on the curve, not the point at infinity.
// Coordinates shorter than the coordinate size are read as big-endian numbers.
Status check_point_on_curve(uint16_t tpm_curve, const EccPoint& point);

// A private scalar d, 1 <= d < order, drawn from `rng`; coordinate-size bytes.
Result<SecretBytes> ecc_generate_private(uint16_t tpm_curve, RandomSource& rng);

struct EcdhShared {
  EccPoint ephemeral_public;  // Q_e = d_e·G, fixed-size coordinates
  SecretBytes z;              // x-coordinate of d_e·Q_peer, coordinate size, leading zeros kept
};

// One-pass ECDH with an ephemeral key (SP800-56A C(1e,1s)), as used for salts
// and secret sharing. `peer` is checked to be on the curve first.
// `ephemeral_private` is d_e as big-endian bytes (1 <= d_e < order); empty
// draws a fresh one from system_random(). A fixed d_e is for known-answer tests.
Result<EcdhShared> ecdh_ephemeral(uint16_t tpm_curve, const EccPoint& peer, ByteView ephemeral_private);

// ---- RSA ----

// RSAES-OAEP (RFC 8017 §7.1) to the public key (modulus, exponent), with
// `hash_alg` for both the label hash and MGF1. exponent 0 means 65537.
// `label` is given without its NUL; the TPM's label includes it, so one 00 is
// appended (an empty label stays empty). `seed` is the OAEP seed (digest-size
// bytes); empty draws a fresh one from system_random(), a fixed one makes the
// result reproducible for known-answer tests. Returns modulus-size bytes.
Result<Bytes> rsa_oaep_encrypt(ByteView modulus, uint32_t exponent, uint16_t hash_alg, std::string_view label,
                               ByteView plaintext, ByteView seed);

// ---- Comparison ----

// Constant-time equality (CRYPTO_memcmp); false when the lengths differ.
bool constant_time_equal(ByteView a, ByteView b);

}  // namespace tpmsec::crypto

#endif  // TPMSEC_CRYPTO_H_
