#include "tpmsec/ek_certificate.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

#include "crypto/openssl.h"
#include "tpmsec/constants.h"

namespace tpmsec::crypto {
namespace {

using internal::BnPtr;
using internal::Owned;
using internal::PkeyPtr;
using BioPtr = Owned<BIO, BIO_free_all>;
using X509Ptr = Owned<X509, X509_free>;
using StoreCtxPtr = Owned<X509_STORE_CTX, X509_STORE_CTX_free>;

// tcg-kp-EKCertificate (TCG EK Credential Profile for TPM Family 2.0, §3.2):
// the extended key usage that says "this certifies a TPM's endorsement key".
constexpr char kEkCertificateEku[] = "2.23.133.8.1";

// basicConstraints present with cA=TRUE: what may vouch for other
// certificates. (OpenSSL's X509_check_ca also accepts version 1 roots and
// keyCertSign without basicConstraints; an anchor here must say it is one.)
bool is_ca(X509* cert) {
  uint32_t flags = X509_get_extension_flags(cert);  // also caches the extensions
  return (flags & EXFLAG_BCONS) != 0 && (flags & EXFLAG_CA) != 0;
}

// Adds every CA certificate of a PEM file to `store`; returns how many
// certificates the file held (`*cas`: how many of them were CAs).
Result<size_t> add_pem_file(X509_STORE* store, const PemFile& file, size_t* cas) {
  const std::string& text = file.text;
  BioPtr bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  if (!bio) return internal::openssl_error("BIO_new_mem_buf");
  size_t count = 0;
  for (;;) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) {
      unsigned long e = ERR_peek_last_error();
      bool at_end = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
      if (at_end && count > 0) {
        ERR_clear_error();
        break;
      }
      if (at_end) {
        ERR_clear_error();
        return usage_error(fmt::format("CA file {} holds no PEM certificate", file.name));
      }
      // The operator's file is malformed: a usage error, with OpenSSL's reason.
      Error reason = internal::openssl_error(fmt::format("reading certificate {}", count + 1));
      return usage_error(
          fmt::format("CA file {} is not a valid PEM certificate bundle: {}", file.name, reason.message()));
    }
    // Only a CA is an anchor or an intermediate: a leaf certificate in the
    // bundle (an EK or TLS certificate filed there by mistake) vouches for
    // nothing, not even for itself.
    if (is_ca(cert.get())) {
      if (X509_STORE_add_cert(store, cert.get()) != 1) {
        return internal::openssl_error(fmt::format("adding certificate {} of {}", count + 1, file.name));
      }
      ++*cas;
    }
    ++count;
  }
  return count;
}

std::string x509_name(const X509_NAME* name) {
  if (name == nullptr) return "(none)";
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_ONELINE) < 0) return "(unprintable)";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  std::string s = n > 0 ? std::string(data, static_cast<size_t>(n)) : "";
  return s.empty() ? "(empty)" : s;
}

Result<Bytes> bn_param(const EVP_PKEY* pkey, const char* param, size_t pad_to) {
  BIGNUM* raw = nullptr;
  if (EVP_PKEY_get_bn_param(pkey, param, &raw) != 1) return internal::openssl_error(param);
  BnPtr bn(raw);
  size_t n = static_cast<size_t>(BN_num_bytes(bn.get()));
  size_t size = std::max(n, pad_to);
  Bytes out(size);
  if (BN_bn2binpad(bn.get(), out.data(), static_cast<int>(size)) < 0) return internal::openssl_error("BN_bn2binpad");
  return out;
}

// The TPM curve id of an OpenSSL group name, and its coordinate size.
std::pair<uint16_t, size_t> tpm_curve(std::string_view group) {
  if (group == "prime256v1" || group == "P-256") return {curve::kNistP256, 32};
  if (group == "secp384r1" || group == "P-384") return {curve::kNistP384, 48};
  return {0, 0};
}

Result<CertifiedKey> key_of(X509* cert) {
  EVP_PKEY* pkey = X509_get0_pubkey(cert);
  if (pkey == nullptr) return internal::openssl_error("the certificate's public key");
  CertifiedKey key;
  int bits = EVP_PKEY_get_bits(pkey);
  switch (EVP_PKEY_get_base_id(pkey)) {
    case EVP_PKEY_RSA: {
      key.type = alg::kRsa;
      key.key_description = fmt::format("RSA-{}", bits);
      TPMSEC_ASSIGN_OR_RETURN(key.modulus, bn_param(pkey, OSSL_PKEY_PARAM_RSA_N, 0));
      TPMSEC_ASSIGN_OR_RETURN(Bytes e, bn_param(pkey, OSSL_PKEY_PARAM_RSA_E, 0));
      if (e.size() > 8) return parse_error("the certificate's RSA exponent is longer than 64 bits");
      for (uint8_t b : e) key.exponent = key.exponent << 8 | b;
      return key;
    }
    case EVP_PKEY_EC: {
      char group[64] = {};
      if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), nullptr) != 1) {
        return internal::openssl_error("the certificate's EC group");
      }
      auto [tpm_id, size] = tpm_curve(group);
      key.type = alg::kEcc;
      key.curve = tpm_id;
      key.key_description = fmt::format("EC {}", group);
      if (tpm_id == 0) return key;  // the caller refuses it, naming the curve
      TPMSEC_ASSIGN_OR_RETURN(key.x, bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X, size));
      TPMSEC_ASSIGN_OR_RETURN(key.y, bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, size));
      if (key.x.size() != size || key.y.size() != size) return parse_error("EC point coordinate longer than its curve");
      return key;
    }
    default:
      key.key_description = OBJ_nid2sn(EVP_PKEY_get_base_id(pkey));
      return key;
  }
}

// An EK certificate is DER (EK Credential Profile §2.2.1.5); some TPMs'
// indices are larger than the certificate and padded. Only the first DER
// object is the certificate; padding must be 00 or FF.
Result<X509Ptr> parse_der(ByteView der) {
  const unsigned char* p = der.data();
  X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (!cert) {
    ERR_clear_error();
    return parse_error(fmt::format("the EK certificate ({} bytes) is not a DER X.509 certificate", der.size()));
  }
  size_t used = static_cast<size_t>(p - der.data());
  bool padding = std::all_of(der.begin() + static_cast<std::ptrdiff_t>(used), der.end(),
                             [](uint8_t b) { return b == 0x00 || b == 0xFF; });
  if (!padding) {
    return parse_error(fmt::format("the EK certificate is {} bytes followed by {} bytes that are not padding", used,
                                   der.size() - used));
  }
  return cert;
}

}  // namespace

struct CaBundle::Intermediates {
  std::map<std::string, X509Ptr> by_file;
};

namespace {

// One certificate of an intermediates cache file: DER, else PEM.
Result<X509Ptr> cached_certificate(const PemFile& file) {
  const auto* p = reinterpret_cast<const unsigned char*>(file.text.data());
  X509Ptr cert(d2i_X509(nullptr, &p, static_cast<long>(file.text.size())));
  if (!cert) {
    BioPtr bio(BIO_new_mem_buf(file.text.data(), static_cast<int>(file.text.size())));
    if (bio) cert.reset(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  }
  ERR_clear_error();
  if (!cert) return usage_error(fmt::format("intermediate file {} is not a DER or PEM certificate", file.name));
  return cert;
}

// The last path segment of each caIssuers URL of `cert`'s AIA.
std::vector<std::string> ca_issuers_files(X509* cert) {
  std::vector<std::string> out;
  Owned<AUTHORITY_INFO_ACCESS, AUTHORITY_INFO_ACCESS_free> aia(
      static_cast<AUTHORITY_INFO_ACCESS*>(X509_get_ext_d2i(cert, NID_info_access, nullptr, nullptr)));
  ERR_clear_error();
  for (int i = 0; aia && i < sk_ACCESS_DESCRIPTION_num(aia.get()); ++i) {
    const ACCESS_DESCRIPTION* ad = sk_ACCESS_DESCRIPTION_value(aia.get(), i);
    if (OBJ_obj2nid(ad->method) != NID_ad_ca_issuers || ad->location->type != GEN_URI) continue;
    const ASN1_IA5STRING* uri = ad->location->d.uniformResourceIdentifier;
    std::string url(reinterpret_cast<const char*>(ASN1_STRING_get0_data(uri)),
                    static_cast<size_t>(ASN1_STRING_length(uri)));
    std::string file = url.substr(url.find_last_of('/') + 1);
    if (!file.empty() && file != "." && file != "..") out.push_back(std::move(file));
  }
  return out;
}

void free_stack(STACK_OF(X509) * s) { sk_X509_free(s); }
using StackPtr = Owned<STACK_OF(X509), free_stack>;

// The cached intermediates `cert`'s AIA names, and theirs, up to four deep
// (borrowed from the cache: the stack frees only itself).
StackPtr untrusted_chain(X509* cert, const CaBundle::Intermediates* cache) {
  StackPtr chain(sk_X509_new_null());
  if (!cache || !chain) return chain;
  X509* at = cert;
  for (int depth = 0; at && depth < 4; ++depth) {
    X509* next = nullptr;
    for (const std::string& file : ca_issuers_files(at)) {
      auto found = cache->by_file.find(file);
      if (found == cache->by_file.end()) continue;
      sk_X509_push(chain.get(), found->second.get());
      if (!next) next = found->second.get();
    }
    at = next;
  }
  return chain;
}

}  // namespace

Status CaBundle::add_intermediates(const std::vector<PemFile>& files) {
  auto cache = std::make_shared<Intermediates>();
  for (const PemFile& f : files) {
    TPMSEC_ASSIGN_OR_RETURN(X509Ptr cert, cached_certificate(f));
    std::string name = f.name.substr(f.name.find_last_of('/') + 1);
    cache->by_file[name] = std::move(cert);
  }
  intermediates_ = std::move(cache);
  return ok_status();
}

Result<CaBundle> CaBundle::from_pem_files(const std::string& file_or_dir, const std::vector<PemFile>& files) {
  if (files.empty()) return usage_error(fmt::format("CA directory {} holds no certificate files", file_or_dir));

  CaBundle bundle;
  bundle.store_.reset(X509_STORE_new(), X509_STORE_free);
  if (!bundle.store_) return internal::openssl_error("X509_STORE_new");
  size_t certificates = 0;
  for (const PemFile& f : files) {
    TPMSEC_ASSIGN_OR_RETURN(size_t n, add_pem_file(bundle.store_.get(), f, &bundle.count_));
    certificates += n;
  }
  if (bundle.count_ == 0) {
    return usage_error(
        fmt::format("CA bundle {} holds {} certificates but no CA certificate (basicConstraints "
                    "cA=TRUE): nothing in it can vouch for an EK certificate",
                    file_or_dir, certificates));
  }
  // No X509_V_FLAG_PARTIAL_CHAIN: a chain ends at a self-signed CA of the
  // bundle; see the header.
  return bundle;
}

Result<CertifiedKey> certificate_public_key(ByteView der) {
  TPMSEC_ASSIGN_OR_RETURN(X509Ptr cert, parse_der(der));
  return key_of(cert.get());
}

namespace {

// What makes a certificate an EK certificate rather than any certificate
// the CA signed (EK Credential Profile §3.2): the tcg-kp-EKCertificate
// extended key usage, not a CA, and a key usage (when present) that lets an
// EK do what it does, decrypt a salt (keyEncipherment for RSA, keyAgreement
// for ECC). Intel's PTT and AMD's fTPM assert keyEncipherment on their ECC
// EK certificates, against the profile: accepted too, since it is no less
// an EK's usage (tests/data/ek-certs/, Intel-PTT-GLK and AMD-fTPM-RN).
Status check_ek_profile(X509* cert, const CertifiedKey& key) {
  auto refuse = [&](const std::string& why) {
    return integrity_error(fmt::format("the certificate (subject {}, issuer {}) is not an EK certificate: {}",
                                       x509_name(X509_get_subject_name(cert)), x509_name(X509_get_issuer_name(cert)),
                                       why));
  };
  uint32_t flags = X509_get_extension_flags(cert);
  if (flags & EXFLAG_INVALID) return refuse("its extensions do not parse");
  if (flags & EXFLAG_CA) return refuse("it is a CA certificate (basicConstraints cA=TRUE)");
  bool has_ek_eku = false;
  if (flags & EXFLAG_XKUSAGE) {
    int critical = 0;
    Owned<EXTENDED_KEY_USAGE, EXTENDED_KEY_USAGE_free> eku(
        static_cast<EXTENDED_KEY_USAGE*>(X509_get_ext_d2i(cert, NID_ext_key_usage, &critical, nullptr)));
    Owned<ASN1_OBJECT, ASN1_OBJECT_free> wanted(OBJ_txt2obj(kEkCertificateEku, 1));
    if (!wanted) return internal::openssl_error("OBJ_txt2obj");
    for (int i = 0; eku && i < sk_ASN1_OBJECT_num(eku.get()); ++i) {
      if (OBJ_cmp(sk_ASN1_OBJECT_value(eku.get(), i), wanted.get()) == 0) has_ek_eku = true;
    }
  }
  ERR_clear_error();
  if (!has_ek_eku) return refuse(fmt::format("no extended key usage tcg-kp-EKCertificate ({})", kEkCertificateEku));
  if (flags & EXFLAG_KUSAGE) {
    uint32_t usage = X509_get_key_usage(cert);
    if (key.type == alg::kRsa && !(usage & KU_KEY_ENCIPHERMENT)) {
      return refuse("its key usage lacks keyEncipherment, which an RSA EK needs to decrypt a salt");
    }
    if (key.type == alg::kEcc && !(usage & (KU_KEY_AGREEMENT | KU_KEY_ENCIPHERMENT))) {
      return refuse(
          "its key usage has neither keyAgreement nor keyEncipherment, one of which an ECC EK needs to derive a "
          "salt");
    }
  }
  return ok_status();
}

}  // namespace

Result<CertifiedKey> verify_ek_certificate(ByteView der, const CaBundle& bundle) {
  return verify_ek_certificate(der, bundle, std::chrono::system_clock::now());
}

Result<CertifiedKey> verify_ek_certificate(ByteView der, const CaBundle& bundle,
                                           std::chrono::system_clock::time_point at) {
  if (bundle.store() == nullptr) return usage_error("no CA bundle loaded");
  TPMSEC_ASSIGN_OR_RETURN(X509Ptr cert, parse_der(der));
  StackPtr untrusted = untrusted_chain(cert.get(), bundle.intermediates());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), bundle.store(), cert.get(), untrusted.get()) != 1) {
    return internal::openssl_error("X509_STORE_CTX_init");
  }
  // Every certificate of the chain is checked at this one instant.
  X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx.get()), std::chrono::system_clock::to_time_t(at));
  int verified = X509_verify_cert(ctx.get());
  if (verified != 1) {
    int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return integrity_error(
        fmt::format("the EK certificate (subject {}, issuer {}) does not verify against the CA "
                    "bundle: {}",
                    x509_name(X509_get_subject_name(cert.get())), x509_name(X509_get_issuer_name(cert.get())),
                    X509_verify_cert_error_string(err)));
  }
  TPMSEC_ASSIGN_OR_RETURN(CertifiedKey key, key_of(cert.get()));
  TPMSEC_RETURN_IF_ERROR(check_ek_profile(cert.get(), key));
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(ctx.get());
  if (chain && sk_X509_num(chain) > 0) {
    key.root_subject = x509_name(X509_get_subject_name(sk_X509_value(chain, sk_X509_num(chain) - 1)));
  }
  return key;
}

}  // namespace tpmsec::crypto
