// The salt of a salted session (Part 1 §19.6.13 and Annex B.10 / C.6, "secret
// sharing" with label "SECRET"): the caller makes a secret only the TPM key
// `tpmKey` can recover, sends it as StartAuthSession's encryptedSalt, and both
// sides feed the salt into sessionKey = KDFa(authHash, bindAuth ‖ salt, "ATH", …).
//
// ECC key (one-pass ECDH, C(1e,1s)):
//   Z = x(d_e · Q_key), coordinate-size bytes with leading zeros kept;
//   salt = KDFe(nameAlg, Z, "SECRET", Q_e.x, Q_key.x, 8 · digest size of nameAlg);
//   encryptedSalt = TPM2B(Q_e.x) ‖ TPM2B(Q_e.y).
// RSA key: salt = random bytes of the OAEP hash's digest size;
//   encryptedSalt = RSA-OAEP(OAEP hash, label "SECRET\0", salt).
//   The OAEP hash is the key's scheme hash when its scheme is OAEP, else its
//   nameAlg (the TPM's rule in CryptSecretDecrypt); other schemes are refused.
#ifndef TPMSEC_SALT_H_
#define TPMSEC_SALT_H_

#include "tpmsec/bytes.h"
#include "tpmsec/crypto.h"
#include "tpmsec/result.h"
#include "tpmsec/structures.h"

namespace tpmsec {

struct SaltedSecret {
  SecretBytes salt;
  // The contents of TPM2B_ENCRYPTED_SECRET, i.e. without its outer size.
  Bytes encrypted_salt;
};

// Makes a salt for `tpm_key` (the TPMT_PUBLIC of the key StartAuthSession
// names as tpmKey), drawing the ephemeral key / salt and OAEP seed from `rng`.
// The ECC point is checked to be on the curve first (kIntegrity if not).
Result<SaltedSecret> make_salt(const Public& tpm_key, crypto::RandomSource& rng);

// Derandomized ECC salt: `ephemeral_private` is d_e (big-endian, 1 <= d_e <
// order); empty draws one from crypto::system_random().
Result<SaltedSecret> make_salt_ecc(const Public& tpm_key, ByteView ephemeral_private);

// Derandomized RSA salt: encrypts the given `salt` (at most the OAEP hash's
// digest size, which the TPM enforces) with the OAEP seed `oaep_seed`
// (digest size; empty draws one from crypto::system_random()).
Result<SaltedSecret> make_salt_rsa(const Public& tpm_key, ByteView salt, ByteView oaep_seed);

// The OAEP hash the TPM uses to decrypt a secret for this RSA key (see above).
Result<uint16_t> rsa_secret_hash(const Public& tpm_key);

}  // namespace tpmsec

#endif  // TPMSEC_SALT_H_
