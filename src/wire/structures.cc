#include "tpmsec/structures.h"

#include <fmt/format.h>

namespace tpmsec {
namespace {

// Limits from the reference implementation's Implementation.h, rounded up so
// that real TPMs with more PCRs or banks still parse.
constexpr size_t kMaxPcrSelect = 32;  // sizeofSelect: 256 PCRs
constexpr uint32_t kMaxBanks = 16;    // HASH_COUNT
constexpr uint32_t kMaxDigests = 8;   // TPML_DIGEST
constexpr uint32_t kMaxCapEntries = 1024;
constexpr size_t kMaxEccParameter = 66;  // P-521
constexpr size_t kMaxRsaModulus = 512;   // RSA-4096

void fail_unknown(Reader& r, std::string_view what, uint16_t id) {
  r.fail(fmt::format("unknown {} 0x{:04x} at offset {}", what, id, r.offset()));
}

bool has_hash_details(uint16_t scheme) {
  switch (scheme) {
    case alg::kRsassa:
    case alg::kRsapss:
    case alg::kOaep:
    case alg::kEcdsa:
    case alg::kEcdh:
    case alg::kHmac:
    case 0x001A /* ECDAA */:
    case 0x001B /* SM2 */:
    case 0x001C /* ECSCHNORR */:
    case 0x0020 /* MGF1 */:
    case 0x0021 /* KDF1_SP800_56A */:
    case 0x0022 /* KDF2 */:
    case 0x0007 /* KDF1_SP800_108 */:
    case 0x001D /* ECMQV */:
      return true;
    default:
      return false;
  }
}

void marshal_scheme(Writer& w, const Scheme& s, uint16_t object_type) {
  w.u16(s.scheme);
  if (s.scheme == alg::kNull || s.scheme == alg::kRsaes) return;
  w.u16(s.hash);
  if (s.scheme == 0x001A || (object_type == alg::kKeyedHash && s.scheme == alg::kXor)) w.u16(s.extra);
}

void unmarshal_scheme(Reader& r, Scheme& s, uint16_t object_type, std::string_view what) {
  s.scheme = r.u16(what);
  if (!r.ok() || s.scheme == alg::kNull || s.scheme == alg::kRsaes) return;
  bool keyed_xor = object_type == alg::kKeyedHash && s.scheme == alg::kXor;
  if (!has_hash_details(s.scheme) && !keyed_xor) return fail_unknown(r, what, s.scheme);
  s.hash = r.u16(what);
  if (s.scheme == 0x001A || keyed_xor) s.extra = r.u16(what);
}

}  // namespace

PcrSelection PcrSelection::single(uint16_t hash, uint32_t pcr) {
  PcrSelection s;
  s.hash = hash;
  s.select.assign(std::max<size_t>(3, pcr / 8 + 1), 0);
  s.select[pcr / 8] = static_cast<uint8_t>(1u << (pcr % 8));
  return s;
}

void marshal(Writer& w, const PcrSelection& v) {
  w.u16(v.hash);
  w.count8(v.select.size(), "TPMS_PCR_SELECTION.sizeofSelect", kMaxPcrSelect);
  w.bytes(v.select, "TPMS_PCR_SELECTION.pcrSelect");
}
void unmarshal(Reader& r, PcrSelection& v) {
  v.hash = r.u16("TPMS_PCR_SELECTION.hash");
  uint8_t n = r.u8("TPMS_PCR_SELECTION.sizeofSelect");
  if (r.ok() && n > kMaxPcrSelect) {
    r.fail(fmt::format("TPMS_PCR_SELECTION.sizeofSelect {} exceeds {}", n, kMaxPcrSelect));
  }
  ByteView b = r.bytes(r.ok() ? n : 0, "TPMS_PCR_SELECTION.pcrSelect");
  v.select.assign(b.begin(), b.end());
}

void marshal(Writer& w, const PcrSelectionList& v) {
  w.count(v.banks.size(), "TPML_PCR_SELECTION.count", kMaxBanks);
  for (const auto& s : v.banks) marshal(w, s);
}
void unmarshal(Reader& r, PcrSelectionList& v) {
  uint32_t n = r.count("TPML_PCR_SELECTION.count", kMaxBanks);
  v.banks.assign(n, {});
  for (auto& s : v.banks) unmarshal(r, s);
}

void marshal(Writer& w, const DigestList& v) {
  w.count(v.digests.size(), "TPML_DIGEST.count", kMaxDigests);
  for (const auto& d : v.digests) w.tpm2b(d, "TPM2B_DIGEST", 64);
}
void unmarshal(Reader& r, DigestList& v) {
  uint32_t n = r.count("TPML_DIGEST.count", kMaxDigests);
  v.digests.assign(n, {});
  for (auto& d : v.digests) {
    ByteView b = r.tpm2b("TPM2B_DIGEST", 64);
    d.assign(b.begin(), b.end());
  }
}

void marshal(Writer& w, const TaggedHash& v) {
  // No size on the wire: the algorithm says how long the digest is.
  auto size = digest_size(v.hash);
  if (!size) return w.fail(fmt::format("TPMT_HA.hashAlg 0x{:04x} at offset {} is unknown", v.hash, w.size()));
  if (v.digest.size() != *size) {
    return w.fail(fmt::format("TPMT_HA.digest at offset {} has size {}, {} needs {}", w.size() + 2, v.digest.size(),
                              hash_name(v.hash), *size));
  }
  w.u16(v.hash);
  w.bytes(v.digest, "TPMT_HA.digest");
}
void unmarshal(Reader& r, TaggedHash& v) {
  v.hash = r.u16("TPMT_HA.hashAlg");
  if (!r.ok()) return;
  auto size = digest_size(v.hash);
  if (!size) return fail_unknown(r, "TPMT_HA hash algorithm", v.hash);
  ByteView b = r.bytes(*size, "TPMT_HA.digest");
  v.digest.assign(b.begin(), b.end());
}

void marshal(Writer& w, const DigestValues& v) {
  w.count(v.digests.size(), "TPML_DIGEST_VALUES.count", kMaxBanks);
  for (const auto& d : v.digests) marshal(w, d);
}
void unmarshal(Reader& r, DigestValues& v) {
  uint32_t n = r.count("TPML_DIGEST_VALUES.count", kMaxBanks);
  v.digests.assign(n, {});
  for (auto& d : v.digests) unmarshal(r, d);
}

void marshal(Writer& w, const SymDef& v) {
  w.u16(v.algorithm);
  if (v.algorithm == alg::kNull) return;
  w.u16(v.key_bits);
  if (v.algorithm != alg::kXor) w.u16(v.mode);
}
void unmarshal(Reader& r, SymDef& v) {
  v = {};
  v.algorithm = r.u16("TPMT_SYM_DEF.algorithm");
  if (!r.ok() || v.algorithm == alg::kNull) return;
  if (v.algorithm != alg::kAes && v.algorithm != alg::kXor && v.algorithm != 0x0026 /* CAMELLIA */ &&
      v.algorithm != 0x0013 /* SM4 */) {
    return fail_unknown(r, "symmetric algorithm", v.algorithm);
  }
  v.key_bits = r.u16("TPMT_SYM_DEF.keyBits");
  if (v.algorithm != alg::kXor) v.mode = r.u16("TPMT_SYM_DEF.mode");
}

void marshal(Writer& w, const Public& v) {
  size_t at = w.size();
  w.u16(v.type);
  w.u16(v.name_alg);
  w.u32(v.attributes);
  w.tpm2b(v.auth_policy, "TPMT_PUBLIC.authPolicy", 64);
  switch (v.type) {
    case alg::kEcc:
      marshal(w, v.symmetric);
      marshal_scheme(w, v.scheme, v.type);
      w.u16(v.curve);
      marshal_scheme(w, v.kdf, v.type);
      w.tpm2b(v.unique_x, "TPMS_ECC_POINT.x", kMaxEccParameter);
      w.tpm2b(v.unique_y, "TPMS_ECC_POINT.y", kMaxEccParameter);
      break;
    case alg::kRsa:
      marshal(w, v.symmetric);
      marshal_scheme(w, v.scheme, v.type);
      w.u16(v.key_bits);
      w.u32(v.exponent);
      w.tpm2b(v.unique_x, "TPM2B_PUBLIC_KEY_RSA", kMaxRsaModulus);
      break;
    case alg::kKeyedHash:
      marshal_scheme(w, v.scheme, v.type);
      w.tpm2b(v.unique_x, "TPM2B_DIGEST", 64);
      break;
    case alg::kSymCipher:
      marshal(w, v.symmetric);
      w.tpm2b(v.unique_x, "TPM2B_DIGEST", 64);
      break;
    default:
      // Without its parameters the area would end early: refuse it, as unmarshal does.
      w.fail(fmt::format("TPMT_PUBLIC.type 0x{:04x} at offset {} has no layout tpmsec knows", v.type, at));
  }
}

void unmarshal(Reader& r, Public& v) {
  v = {};
  v.type = r.u16("TPMT_PUBLIC.type");
  v.name_alg = r.u16("TPMT_PUBLIC.nameAlg");
  if (r.ok() && v.name_alg != alg::kNull && !digest_size(v.name_alg)) {
    return fail_unknown(r, "TPMT_PUBLIC.nameAlg", v.name_alg);
  }
  v.attributes = r.u32("TPMT_PUBLIC.objectAttributes");
  ByteView policy = r.tpm2b("TPMT_PUBLIC.authPolicy", 64);
  v.auth_policy.assign(policy.begin(), policy.end());
  if (!r.ok()) return;
  auto assign = [](Bytes& out, ByteView b) { out.assign(b.begin(), b.end()); };
  switch (v.type) {
    case alg::kEcc:
      unmarshal(r, v.symmetric);
      unmarshal_scheme(r, v.scheme, v.type, "TPMT_ECC_SCHEME");
      v.curve = r.u16("TPMS_ECC_PARMS.curveID");
      unmarshal_scheme(r, v.kdf, v.type, "TPMT_KDF_SCHEME");
      assign(v.unique_x, r.tpm2b("TPMS_ECC_POINT.x", kMaxEccParameter));
      assign(v.unique_y, r.tpm2b("TPMS_ECC_POINT.y", kMaxEccParameter));
      break;
    case alg::kRsa:
      unmarshal(r, v.symmetric);
      unmarshal_scheme(r, v.scheme, v.type, "TPMT_RSA_SCHEME");
      v.key_bits = r.u16("TPMS_RSA_PARMS.keyBits");
      v.exponent = r.u32("TPMS_RSA_PARMS.exponent");
      assign(v.unique_x, r.tpm2b("TPM2B_PUBLIC_KEY_RSA", kMaxRsaModulus));
      break;
    case alg::kKeyedHash:
      unmarshal_scheme(r, v.scheme, v.type, "TPMT_KEYEDHASH_SCHEME");
      assign(v.unique_x, r.tpm2b("TPM2B_DIGEST", 64));
      break;
    case alg::kSymCipher:
      unmarshal(r, v.symmetric);
      assign(v.unique_x, r.tpm2b("TPM2B_DIGEST", 64));
      break;
    default:
      fail_unknown(r, "TPMT_PUBLIC.type", v.type);
  }
}

void marshal(Writer& w, const PublicArea& v) {
  auto mark = w.begin_size16("TPM2B_PUBLIC");
  marshal(w, v.public_area);
  w.end_size(mark);
}
void unmarshal(Reader& r, PublicArea& v) {
  Reader body = r.sized("TPM2B_PUBLIC");
  unmarshal(body, v.public_area);
  body.expect_end("TPM2B_PUBLIC");
  r.absorb(body);
}

void marshal(Writer& w, const NvPublic& v) {
  w.u32(v.nv_index);
  w.u16(v.name_alg);
  w.u32(v.attributes);
  w.tpm2b(v.auth_policy, "TPMS_NV_PUBLIC.authPolicy", 64);
  w.u16(v.data_size);
}
void unmarshal(Reader& r, NvPublic& v) {
  v = {};
  v.nv_index = r.u32("TPMS_NV_PUBLIC.nvIndex");
  v.name_alg = r.u16("TPMS_NV_PUBLIC.nameAlg");
  if (r.ok() && !digest_size(v.name_alg)) return fail_unknown(r, "TPMS_NV_PUBLIC.nameAlg", v.name_alg);
  v.attributes = r.u32("TPMS_NV_PUBLIC.attributes");
  ByteView policy = r.tpm2b("TPMS_NV_PUBLIC.authPolicy", 64);
  v.auth_policy.assign(policy.begin(), policy.end());
  v.data_size = r.u16("TPMS_NV_PUBLIC.dataSize");
}

void marshal(Writer& w, const NvPublicArea& v) {
  auto mark = w.begin_size16("TPM2B_NV_PUBLIC");
  marshal(w, v.nv_public);
  w.end_size(mark);
}
void unmarshal(Reader& r, NvPublicArea& v) {
  Reader body = r.sized("TPM2B_NV_PUBLIC");
  unmarshal(body, v.nv_public);
  body.expect_end("TPM2B_NV_PUBLIC");
  r.absorb(body);
}

void marshal(Writer& w, const SensitiveCreate& v) {
  auto mark = w.begin_size16("TPM2B_SENSITIVE_CREATE");
  w.tpm2b(v.user_auth, "TPMS_SENSITIVE_CREATE.userAuth", 64);
  w.tpm2b(v.data, "TPMS_SENSITIVE_CREATE.data", 256);
  w.end_size(mark);
}
void unmarshal(Reader& r, SensitiveCreate& v) {
  Reader body = r.sized("TPM2B_SENSITIVE_CREATE");
  ByteView auth = body.tpm2b("TPMS_SENSITIVE_CREATE.userAuth", 64);
  ByteView data = body.tpm2b("TPMS_SENSITIVE_CREATE.data", 256);
  body.expect_end("TPM2B_SENSITIVE_CREATE");
  r.absorb(body);
  v.user_auth.assign(auth.begin(), auth.end());
  v.data.assign(data.begin(), data.end());
}

void marshal(Writer& w, const Ticket& v) {
  w.u16(v.tag);
  w.u32(v.hierarchy);
  w.tpm2b(v.digest, "TPMT_TK.digest", 64);
}
void unmarshal(Reader& r, Ticket& v) {
  v.tag = r.u16("TPMT_TK.tag");
  v.hierarchy = r.u32("TPMT_TK.hierarchy");
  ByteView d = r.tpm2b("TPMT_TK.digest", 64);
  v.digest.assign(d.begin(), d.end());
}

void marshal(Writer& w, const Context& v) {
  w.u64(v.sequence);
  w.u32(v.saved_handle);
  w.u32(v.hierarchy);
  w.tpm2b(v.blob, "TPMS_CONTEXT.contextBlob", Tpm2bContextData::kMax);
}
void unmarshal(Reader& r, Context& v) {
  v.sequence = r.u64("TPMS_CONTEXT.sequence");
  v.saved_handle = r.u32("TPMS_CONTEXT.savedHandle");
  v.hierarchy = r.u32("TPMS_CONTEXT.hierarchy");
  ByteView b = r.tpm2b("TPMS_CONTEXT.contextBlob", Tpm2bContextData::kMax);
  v.blob.assign(b.begin(), b.end());
}

void marshal(Writer& w, const CapabilityData& v) {
  w.u32(v.capability);
  switch (v.capability) {
    case cap::kAlgs:
      w.count(v.algorithms.size(), "TPML_ALG_PROPERTY.count", kMaxCapEntries);
      for (const auto& a : v.algorithms) {
        w.u16(a.alg);
        w.u32(a.attributes);
      }
      break;
    case cap::kHandles:
    case cap::kCommands: {
      const auto& list = v.capability == cap::kHandles ? v.handles : v.commands;
      w.count(list.size(), "TPML_HANDLE.count", kMaxCapEntries);
      for (uint32_t h : list) w.u32(h);
      break;
    }
    case cap::kPcrs:
      marshal(w, v.pcrs);
      break;
    case cap::kTpmProperties:
      w.count(v.properties.size(), "TPML_TAGGED_TPM_PROPERTY.count", kMaxCapEntries);
      for (const auto& p : v.properties) {
        w.u32(p.property);
        w.u32(p.value);
      }
      break;
    case cap::kEccCurves:
      w.count(v.curves.size(), "TPML_ECC_CURVE.count", kMaxCapEntries);
      for (uint16_t c : v.curves) w.u16(c);
      break;
    default:
      w.fail(fmt::format("unsupported capability 0x{:08x}", v.capability));
  }
}

void unmarshal(Reader& r, CapabilityData& v) {
  v = {};
  v.capability = r.u32("TPMS_CAPABILITY_DATA.capability");
  if (!r.ok()) return;
  switch (v.capability) {
    case cap::kAlgs:
      v.algorithms.assign(r.count("TPML_ALG_PROPERTY.count", kMaxCapEntries), {});
      for (auto& a : v.algorithms) {
        a.alg = r.u16("TPMS_ALG_PROPERTY.alg");
        a.attributes = r.u32("TPMS_ALG_PROPERTY.algProperties");
      }
      break;
    case cap::kHandles:
    case cap::kCommands: {
      auto& list = v.capability == cap::kHandles ? v.handles : v.commands;
      list.assign(r.count("TPML_HANDLE.count", kMaxCapEntries), 0);
      for (uint32_t& h : list) h = r.u32("TPM_HANDLE");
      break;
    }
    case cap::kPcrs:
      unmarshal(r, v.pcrs);
      break;
    case cap::kTpmProperties:
      v.properties.assign(r.count("TPML_TAGGED_TPM_PROPERTY.count", kMaxCapEntries), {});
      for (auto& p : v.properties) {
        p.property = r.u32("TPMS_TAGGED_PROPERTY.property");
        p.value = r.u32("TPMS_TAGGED_PROPERTY.value");
      }
      break;
    case cap::kEccCurves:
      v.curves.assign(r.count("TPML_ECC_CURVE.count", kMaxCapEntries), 0);
      for (uint16_t& c : v.curves) c = r.u16("TPM_ECC_CURVE");
      break;
    default:
      r.fail(fmt::format("unsupported capability 0x{:08x}", v.capability));
  }
}

}  // namespace tpmsec
