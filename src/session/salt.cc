// Salts for salted sessions; see tpmsec/salt.h for the construction.
#include "tpmsec/salt.h"

#include <string>

#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

constexpr std::string_view kSecretLabel = "SECRET";

}  // namespace

Result<uint16_t> rsa_secret_hash(const Public& tpm_key) {
  if (tpm_key.type != alg::kRsa) return usage_error("salt key is not an RSA key");
  uint16_t hash_alg = tpm_key.name_alg;
  if (tpm_key.scheme.scheme == alg::kOaep) {
    hash_alg = tpm_key.scheme.hash;
  } else if (tpm_key.scheme.scheme != alg::kNull) {
    return unsupported_error("RSA salt key's scheme is not OAEP or NULL, so the TPM cannot decrypt a salt with it");
  }
  if (!digest_size(hash_alg)) return unsupported_error("RSA salt key's OAEP hash is not supported");
  return hash_alg;
}

Result<SaltedSecret> make_salt_ecc(const Public& tpm_key, ByteView ephemeral_private) {
  if (tpm_key.type != alg::kEcc) return usage_error("salt key is not an ECC key");
  std::optional<uint16_t> salt_size = digest_size(tpm_key.name_alg);
  if (!salt_size) return unsupported_error("salt key's nameAlg is not supported");
  crypto::EccPoint q_key{tpm_key.unique_x, tpm_key.unique_y};
  // ecdh_ephemeral checks that Q_key is on the curve before using it.
  TPMSEC_ASSIGN_OR_RETURN(crypto::EcdhShared shared, crypto::ecdh_ephemeral(tpm_key.curve, q_key, ephemeral_private));
  SaltedSecret out;
  // Party V is Q_key.x exactly as the TPM holds it in its public area.
  TPMSEC_ASSIGN_OR_RETURN(out.salt, crypto::kdfe(tpm_key.name_alg, shared.z.view(), kSecretLabel,
                                                 shared.ephemeral_public.x, tpm_key.unique_x, 8u * *salt_size));
  Writer w;
  w.tpm2b(shared.ephemeral_public.x, "TPMS_ECC_POINT.x");
  w.tpm2b(shared.ephemeral_public.y, "TPMS_ECC_POINT.y");
  TPMSEC_ASSIGN_OR_RETURN(out.encrypted_salt, w.finish());
  return out;
}

Result<SaltedSecret> make_salt_rsa(const Public& tpm_key, ByteView salt, ByteView oaep_seed) {
  TPMSEC_ASSIGN_OR_RETURN(uint16_t hash_alg, rsa_secret_hash(tpm_key));
  if (salt.empty() || salt.size() > *digest_size(hash_alg)) {
    return usage_error("RSA salt must be 1.." + std::to_string(*digest_size(hash_alg)) + " bytes");
  }
  SaltedSecret out;
  out.salt = SecretBytes(salt);
  TPMSEC_ASSIGN_OR_RETURN(out.encrypted_salt, crypto::rsa_oaep_encrypt(tpm_key.unique_x, tpm_key.exponent, hash_alg,
                                                                       kSecretLabel, salt, oaep_seed));
  return out;
}

Result<SaltedSecret> make_salt(const Public& tpm_key, crypto::RandomSource& rng) {
  switch (tpm_key.type) {
    case alg::kEcc: {
      TPMSEC_ASSIGN_OR_RETURN(SecretBytes ephemeral_private, crypto::ecc_generate_private(tpm_key.curve, rng));
      return make_salt_ecc(tpm_key, ephemeral_private.view());
    }
    case alg::kRsa: {
      TPMSEC_ASSIGN_OR_RETURN(uint16_t hash_alg, rsa_secret_hash(tpm_key));
      SecretBytes salt(*digest_size(hash_alg)), oaep_seed(*digest_size(hash_alg));
      TPMSEC_RETURN_IF_ERROR(rng.fill(salt.mutable_view()));
      TPMSEC_RETURN_IF_ERROR(rng.fill(oaep_seed.mutable_view()));
      return make_salt_rsa(tpm_key, salt.view(), oaep_seed.view());
    }
    default:
      return usage_error("salt key must be an ECC or RSA key");
  }
}

}  // namespace tpmsec
