// ECC for salts: point validation, private scalars, and one-pass ECDH.
//
// OpenSSL 3.0's EVP cannot derive the public key of an imported private
// scalar (needed for the derandomized entry point), so the point arithmetic
// uses EC_GROUP/EC_POINT, which 3.x does not deprecate. EC_POINT_mul on these
// curves runs in constant time for both the generator and an arbitrary point.
#include <openssl/err.h>
#include <openssl/obj_mac.h>

#include <array>
#include <cstdio>
#include <string>

#include "crypto/openssl.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"

namespace tpmsec::crypto {
namespace {

using internal::BnCtxPtr;
using internal::BnPtr;
using internal::EcPointPtr;
using internal::openssl_error;
using EcGroupPtr = internal::Owned<EC_GROUP, EC_GROUP_free>;

struct Curve {
  uint16_t tpm_curve;
  int nid;
  size_t coordinate_size;
};
constexpr std::array<Curve, 3> kCurves = {{
    {curve::kNistP256, NID_X9_62_prime256v1, 32},
    {curve::kNistP384, NID_secp384r1, 48},
    {kCurveNistP521, NID_secp521r1, 66},
}};

// The groups, built once per process (immutable afterwards, so shareable).
const EC_GROUP* group_at(size_t index) {
  static const std::array<EcGroupPtr, kCurves.size()> groups = [] {
    std::array<EcGroupPtr, kCurves.size()> g;
    for (size_t i = 0; i < kCurves.size(); ++i)
      g[i].reset(EC_GROUP_new_by_curve_name_ex(nullptr, nullptr, kCurves[i].nid));
    return g;
  }();
  return groups[index].get();
}

struct CurveRef {
  const Curve* curve;
  const EC_GROUP* group;
};

Result<CurveRef> lookup(uint16_t tpm_curve) {
  for (size_t i = 0; i < kCurves.size(); ++i) {
    if (kCurves[i].tpm_curve != tpm_curve) continue;
    if (group_at(i) == nullptr) return openssl_error("EC_GROUP_new_by_curve_name");
    return CurveRef{&kCurves[i], group_at(i)};
  }
  char id[8];
  std::snprintf(id, sizeof(id), "0x%04x", tpm_curve);
  return unsupported_error(std::string("ECC curve ") + id + " is not supported");
}

BnPtr to_bn(ByteView bytes) { return BnPtr(BN_bin2bn(bytes.data(), static_cast<int>(bytes.size()), nullptr)); }

// The validated point, or kIntegrity when it is not a point of the curve.
Result<EcPointPtr> decode_point(const CurveRef& c, const EccPoint& point, BN_CTX* bn_ctx) {
  const size_t n = c.curve->coordinate_size;
  if (point.x.empty() || point.y.empty() || point.x.size() > n || point.y.size() > n) {
    return integrity_error("ECC point coordinates must be 1.." + std::to_string(n) + " bytes");
  }
  BnPtr x = to_bn(point.x), y = to_bn(point.y), p(BN_new());
  EcPointPtr q(EC_POINT_new(c.group));
  if (!x || !y || !p || !q || EC_GROUP_get_curve(c.group, p.get(), nullptr, nullptr, bn_ctx) != 1) {
    return openssl_error("decoding an ECC point");
  }
  // Coordinates must be field elements (reduced mod p), on the curve.
  if (BN_cmp(x.get(), p.get()) >= 0 || BN_cmp(y.get(), p.get()) >= 0 ||
      EC_POINT_set_affine_coordinates(c.group, q.get(), x.get(), y.get(), bn_ctx) != 1 ||
      EC_POINT_is_on_curve(c.group, q.get(), bn_ctx) != 1 || EC_POINT_is_at_infinity(c.group, q.get())) {
    ERR_clear_error();
    return integrity_error("ECC point is not on the curve");
  }
  return q;
}

// Fixed-size big-endian bytes of `bn` into `out` (out.size() bytes).
Status to_fixed(const BIGNUM* bn, MutableByteView out) {
  if (BN_bn2binpad(bn, out.data(), static_cast<int>(out.size())) != static_cast<int>(out.size())) {
    return openssl_error("BN_bn2binpad");
  }
  return ok_status();
}

}  // namespace

size_t ecc_coordinate_size(uint16_t tpm_curve) {
  for (const Curve& c : kCurves) {
    if (c.tpm_curve == tpm_curve) return c.coordinate_size;
  }
  return 0;
}

Status check_point_on_curve(uint16_t tpm_curve, const EccPoint& point) {
  TPMSEC_ASSIGN_OR_RETURN(CurveRef c, lookup(tpm_curve));
  BnCtxPtr bn_ctx(BN_CTX_new());
  if (!bn_ctx) return openssl_error("BN_CTX_new");
  auto decoded = decode_point(c, point, bn_ctx.get());
  if (!decoded.ok()) return decoded.error();
  return ok_status();
}

Result<SecretBytes> ecc_generate_private(uint16_t tpm_curve, RandomSource& rng) {
  TPMSEC_ASSIGN_OR_RETURN(CurveRef c, lookup(tpm_curve));
  const BIGNUM* order = EC_GROUP_get0_order(c.group);
  const size_t size = c.curve->coordinate_size;
  // Rejection sampling of a uniform scalar in [1, order): draw as many bits as
  // the order has; for the NIST curves a draw is rejected with p < 2^-32.
  const int excess_bits = static_cast<int>(8 * size) - BN_num_bits(order);
  const uint8_t top_mask = static_cast<uint8_t>(0xff >> excess_bits);
  SecretBytes d(size);
  BnPtr candidate(BN_secure_new());
  if (!candidate) return openssl_error("BN_secure_new");
  for (int attempt = 0; attempt < 64; ++attempt) {
    TPMSEC_RETURN_IF_ERROR(rng.fill(d.mutable_view()));
    d.data()[0] &= top_mask;
    if (BN_bin2bn(d.data(), static_cast<int>(size), candidate.get()) == nullptr) return openssl_error("BN_bin2bn");
    if (!BN_is_zero(candidate.get()) && BN_cmp(candidate.get(), order) < 0) return d;
  }
  return runtime_error("random source produced no valid ECC private key in 64 draws");
}

Result<EcdhShared> ecdh_ephemeral(uint16_t tpm_curve, const EccPoint& peer, ByteView ephemeral_private) {
  TPMSEC_ASSIGN_OR_RETURN(CurveRef c, lookup(tpm_curve));
  const size_t size = c.curve->coordinate_size;
  BnCtxPtr bn_ctx(BN_CTX_secure_new());
  if (!bn_ctx) return openssl_error("BN_CTX_secure_new");
  TPMSEC_ASSIGN_OR_RETURN(EcPointPtr peer_point, decode_point(c, peer, bn_ctx.get()));

  SecretBytes generated;
  if (ephemeral_private.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(generated, ecc_generate_private(tpm_curve, system_random()));
    ephemeral_private = generated.view();
  }
  if (ephemeral_private.size() > size) return usage_error("ECC private key longer than the curve's order");
  BnPtr d(BN_secure_new());
  if (!d || BN_bin2bn(ephemeral_private.data(), static_cast<int>(ephemeral_private.size()), d.get()) == nullptr) {
    return openssl_error("BN_bin2bn");
  }
  BN_set_flags(d.get(), BN_FLG_CONSTTIME);
  if (BN_is_zero(d.get()) || BN_cmp(d.get(), EC_GROUP_get0_order(c.group)) >= 0) {
    return usage_error("ECC private key is not in [1, order)");
  }

  EcPointPtr q_e(EC_POINT_new(c.group)), shared(EC_POINT_new(c.group));
  BnPtr x(BN_new()), y(BN_new()), z(BN_secure_new());
  if (!q_e || !shared || !x || !y || !z) return openssl_error("allocating ECC values");
  if (EC_POINT_mul(c.group, q_e.get(), d.get(), nullptr, nullptr, bn_ctx.get()) != 1 ||
      EC_POINT_mul(c.group, shared.get(), nullptr, peer_point.get(), d.get(), bn_ctx.get()) != 1) {
    return openssl_error("EC_POINT_mul");
  }
  // The NIST curves have cofactor 1, so a valid peer point never gives infinity.
  if (EC_POINT_is_at_infinity(c.group, shared.get())) return integrity_error("ECDH result is the point at infinity");
  if (EC_POINT_get_affine_coordinates(c.group, q_e.get(), x.get(), y.get(), bn_ctx.get()) != 1 ||
      EC_POINT_get_affine_coordinates(c.group, shared.get(), z.get(), nullptr, bn_ctx.get()) != 1) {
    return openssl_error("EC_POINT_get_affine_coordinates");
  }
  EcdhShared out;
  out.ephemeral_public.x.resize(size);
  out.ephemeral_public.y.resize(size);
  out.z = SecretBytes(size);
  TPMSEC_RETURN_IF_ERROR(to_fixed(x.get(), out.ephemeral_public.x));
  TPMSEC_RETURN_IF_ERROR(to_fixed(y.get(), out.ephemeral_public.y));
  TPMSEC_RETURN_IF_ERROR(to_fixed(z.get(), out.z.mutable_view()));
  return out;
}

}  // namespace tpmsec::crypto
