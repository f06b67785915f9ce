// TPM 2.0 structures (Part 2) and their marshalling.
//
// Each type has `void marshal(Writer&, const T&)` and `void unmarshal(Reader&, T&)`.
// Unmarshal treats its input as hostile: every size is bounded by the spec's
// maximum for that field, every algorithm id selecting a layout must be known,
// and failures land in the Reader (see wire.h). Marshal holds the caller's
// values to the same bounds through the Writer: a value unmarshal would
// refuse (a TPM2B over its max, a list over its count, a TPMT_HA digest whose
// length its algorithm contradicts, a type with no known layout) fails the
// Writer with kUsage naming the field, and nothing is written. So whatever
// marshals also parses back. Structures that are hashed (TPMT_PUBLIC for
// names) re-marshal byte for byte to what was parsed.
#ifndef TPMSEC_STRUCTURES_H_
#define TPMSEC_STRUCTURES_H_

#include <cstdint>
#include <tuple>
#include <vector>

#include "tpmsec/bytes.h"
#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec {

// A TPM2B of opaque bytes whose size may not exceed Max (Part 2 §10.4).
template <size_t Max>
struct Sized {
  Bytes bytes;
  static constexpr size_t kMax = Max;
  bool operator==(const Sized&) const = default;
};
using Tpm2bDigest = Sized<64>;            // TPM2B_DIGEST, TPM2B_NONCE, TPM2B_AUTH
using Tpm2bData = Sized<64>;              // TPM2B_DATA
using Tpm2bMaxBuffer = Sized<1024>;       // TPM2B_MAX_BUFFER
using Tpm2bEncryptedSecret = Sized<512>;  // TPM2B_ENCRYPTED_SECRET
using Tpm2bName = Sized<68>;              // TPM2B_NAME (hash alg + 64-byte digest)
using Tpm2bContextData = Sized<5120>;     // TPM2B_CONTEXT_DATA
using Tpm2bPrivate = Sized<2048>;         // TPM2B_PRIVATE
using Tpm2bSensitiveData = Sized<256>;    // TPM2B_SENSITIVE_DATA
using Tpm2bCreationData = Sized<1024>;    // TPM2B_CREATION_DATA, kept opaque
using Tpm2bMaxNvBuffer = Sized<1024>;     // TPM2B_MAX_NV_BUFFER (MAX_NV_BUFFER_SIZE of the reference TPM)

// TPMS_PCR_SELECTION (§10.6.2)
struct PcrSelection {
  uint16_t hash = alg::kSha256;
  Bytes select;  // bitmap, PCR n is bit (n % 8) of byte n / 8
  bool operator==(const PcrSelection&) const = default;

  static PcrSelection single(uint16_t hash, uint32_t pcr);
  bool has(uint32_t pcr) const { return pcr / 8 < select.size() && (select[pcr / 8] >> (pcr % 8)) & 1; }
};

// TPML_PCR_SELECTION (§10.9.7)
struct PcrSelectionList {
  std::vector<PcrSelection> banks;
  bool operator==(const PcrSelectionList&) const = default;
};

// TPML_DIGEST (§10.9.3)
struct DigestList {
  std::vector<Bytes> digests;
  bool operator==(const DigestList&) const = default;
};

// TPMT_HA (§10.3.2): digest size follows from the algorithm.
struct TaggedHash {
  uint16_t hash = alg::kSha256;
  Bytes digest;
  bool operator==(const TaggedHash&) const = default;
};

// TPML_DIGEST_VALUES (§10.9.6)
struct DigestValues {
  std::vector<TaggedHash> digests;
  bool operator==(const DigestValues&) const = default;
};

// TPMT_SYM_DEF and TPMT_SYM_DEF_OBJECT (§11.1.6, §11.1.7). For XOR,
// key_bits holds the hash algorithm and there is no mode.
struct SymDef {
  uint16_t algorithm = alg::kNull;
  uint16_t key_bits = 0;
  uint16_t mode = 0;
  bool operator==(const SymDef&) const = default;

  static SymDef aes128_cfb() { return {alg::kAes, 128, alg::kCfb}; }
  static SymDef xor_with(uint16_t hash) { return {alg::kXor, hash, 0}; }
};

// An asymmetric or keyed-hash scheme: TPMT_ECC_SCHEME, TPMT_RSA_SCHEME,
// TPMT_KEYEDHASH_SCHEME, TPMT_KDF_SCHEME (§11.2). details are the scheme's
// hash algorithm (and ECDAA count / XOR kdf where present).
struct Scheme {
  uint16_t scheme = alg::kNull;
  uint16_t hash = 0;
  uint16_t extra = 0;  // ECDAA count, or the kdf of a keyed-hash XOR scheme
  bool operator==(const Scheme&) const = default;
};

// TPMT_PUBLIC (§12.2.4) for ECC, RSA, keyed-hash and symmetric objects.
struct Public {
  uint16_t type = alg::kEcc;
  uint16_t name_alg = alg::kSha256;
  uint32_t attributes = 0;
  Bytes auth_policy;
  SymDef symmetric;       // ECC, RSA, symcipher
  Scheme scheme;          // ECC, RSA, keyed-hash
  uint16_t curve = 0;     // ECC
  Scheme kdf;             // ECC
  uint16_t key_bits = 0;  // RSA
  uint32_t exponent = 0;  // RSA
  Bytes unique_x;         // ECC x; RSA modulus; keyed-hash/symcipher unique digest
  Bytes unique_y;         // ECC y
  bool operator==(const Public&) const = default;
};

// Object attributes (TPMA_OBJECT, §8.3).
namespace object_attr {
inline constexpr uint32_t kFixedTpm = 0x00000002;
inline constexpr uint32_t kStClear = 0x00000004;
inline constexpr uint32_t kFixedParent = 0x00000010;
inline constexpr uint32_t kSensitiveDataOrigin = 0x00000020;
inline constexpr uint32_t kUserWithAuth = 0x00000040;
inline constexpr uint32_t kAdminWithPolicy = 0x00000080;
inline constexpr uint32_t kNoDa = 0x00000400;
inline constexpr uint32_t kRestricted = 0x00010000;
inline constexpr uint32_t kDecrypt = 0x00020000;
inline constexpr uint32_t kSign = 0x00040000;
}  // namespace object_attr

// TPM2B_PUBLIC (§12.2.5).
struct PublicArea {
  Public public_area;
  bool operator==(const PublicArea&) const = default;
};

// TPMS_NV_PUBLIC (§13.5), the public area of an NV index.
struct NvPublic {
  uint32_t nv_index = 0;
  uint16_t name_alg = alg::kSha256;
  uint32_t attributes = 0;
  Bytes auth_policy;
  uint16_t data_size = 0;
  bool operator==(const NvPublic&) const = default;
};

// NV index attributes (TPMA_NV, §13.4).
namespace nv_attr {
inline constexpr uint32_t kTypeMask = 0x000000F0;  // TPM_NT: 0 is an ordinary index
inline constexpr uint32_t kAuthWrite = 0x00000004;
inline constexpr uint32_t kPpRead = 0x00010000;
inline constexpr uint32_t kOwnerRead = 0x00020000;
inline constexpr uint32_t kAuthRead = 0x00040000;
inline constexpr uint32_t kPolicyRead = 0x00080000;
inline constexpr uint32_t kNoDa = 0x02000000;
inline constexpr uint32_t kReadLocked = 0x10000000;
inline constexpr uint32_t kWritten = 0x20000000;
}  // namespace nv_attr

// TPM2B_NV_PUBLIC (§13.6).
struct NvPublicArea {
  NvPublic nv_public;
  bool operator==(const NvPublicArea&) const = default;
};

// TPM2B_SENSITIVE_CREATE (§11.1.16).
struct SensitiveCreate {
  Bytes user_auth;
  Bytes data;
  bool operator==(const SensitiveCreate&) const = default;
};

// TPMT_TK_CREATION / TPMT_TK_HASHCHECK (§10.7).
struct Ticket {
  uint16_t tag = 0;
  uint32_t hierarchy = 0;
  Bytes digest;
  bool operator==(const Ticket&) const = default;
};

// TPMS_CONTEXT (§14.5).
struct Context {
  uint64_t sequence = 0;
  uint32_t saved_handle = 0;
  uint32_t hierarchy = 0;
  Bytes blob;
  bool operator==(const Context&) const = default;
};

struct AlgProperty {
  uint16_t alg = 0;
  uint32_t attributes = 0;
  bool operator==(const AlgProperty&) const = default;
};
struct TaggedProperty {
  uint32_t property = 0;
  uint32_t value = 0;
  bool operator==(const TaggedProperty&) const = default;
};

// TPMS_CAPABILITY_DATA (§10.10.2) for the capabilities tpmsec reads; the
// member matching `capability` is filled.
struct CapabilityData {
  uint32_t capability = 0;
  std::vector<AlgProperty> algorithms;     // TPM_CAP_ALGS
  std::vector<uint32_t> handles;           // TPM_CAP_HANDLES
  std::vector<uint32_t> commands;          // TPM_CAP_COMMANDS (TPMA_CC)
  PcrSelectionList pcrs;                   // TPM_CAP_PCRS
  std::vector<TaggedProperty> properties;  // TPM_CAP_TPM_PROPERTIES
  std::vector<uint16_t> curves;            // TPM_CAP_ECC_CURVES
  bool operator==(const CapabilityData&) const = default;
};

// Primitive and composite marshalling.
inline void marshal(Writer& w, uint8_t v) { w.u8(v); }
inline void marshal(Writer& w, uint16_t v) { w.u16(v); }
inline void marshal(Writer& w, uint32_t v) { w.u32(v); }
inline void marshal(Writer& w, uint64_t v) { w.u64(v); }
inline void unmarshal(Reader& r, uint8_t& v) { v = r.u8("UINT8"); }
inline void unmarshal(Reader& r, uint16_t& v) { v = r.u16("UINT16"); }
inline void unmarshal(Reader& r, uint32_t& v) { v = r.u32("UINT32"); }
inline void unmarshal(Reader& r, uint64_t& v) { v = r.u64("UINT64"); }

template <size_t Max>
void marshal(Writer& w, const Sized<Max>& v) {
  w.tpm2b(v.bytes, "TPM2B", Max);
}
template <size_t Max>
void unmarshal(Reader& r, Sized<Max>& v) {
  ByteView b = r.tpm2b("TPM2B", Max);
  v.bytes.assign(b.begin(), b.end());
}

void marshal(Writer& w, const PcrSelection& v);
void unmarshal(Reader& r, PcrSelection& v);
void marshal(Writer& w, const PcrSelectionList& v);
void unmarshal(Reader& r, PcrSelectionList& v);
void marshal(Writer& w, const DigestList& v);
void unmarshal(Reader& r, DigestList& v);
void marshal(Writer& w, const TaggedHash& v);
void unmarshal(Reader& r, TaggedHash& v);
void marshal(Writer& w, const DigestValues& v);
void unmarshal(Reader& r, DigestValues& v);
void marshal(Writer& w, const SymDef& v);
void unmarshal(Reader& r, SymDef& v);
void marshal(Writer& w, const Public& v);
void unmarshal(Reader& r, Public& v);
void marshal(Writer& w, const PublicArea& v);
void unmarshal(Reader& r, PublicArea& v);
void marshal(Writer& w, const NvPublic& v);
void unmarshal(Reader& r, NvPublic& v);
void marshal(Writer& w, const NvPublicArea& v);
void unmarshal(Reader& r, NvPublicArea& v);
void marshal(Writer& w, const SensitiveCreate& v);
void unmarshal(Reader& r, SensitiveCreate& v);
void marshal(Writer& w, const Ticket& v);
void unmarshal(Reader& r, Ticket& v);
void marshal(Writer& w, const Context& v);
void unmarshal(Reader& r, Context& v);
void marshal(Writer& w, const CapabilityData& v);
void unmarshal(Reader& r, CapabilityData& v);

// Marshals every element of a tuple of references in order.
template <class... Ts>
void marshal_all(Writer& w, const std::tuple<Ts...>& fields) {
  std::apply([&w](const auto&... f) { (marshal(w, f), ...); }, fields);
}
template <class... Ts>
void unmarshal_all(Reader& r, const std::tuple<Ts&...>& fields) {
  std::apply([&r](auto&... f) { (unmarshal(r, f), ...); }, fields);
}

// Marshals one value to bytes (or the Writer's error) / parses one value that
// must fill `data`.
template <class T>
Result<Bytes> marshal_to_bytes(const T& v) {
  Writer w;
  marshal(w, v);
  return w.finish();
}
template <class T>
Result<T> unmarshal_exact(ByteView data, std::string_view what) {
  Reader r(data);
  T v{};
  unmarshal(r, v);
  r.expect_end(what);
  TPMSEC_RETURN_IF_ERROR(r.status());
  return v;
}

}  // namespace tpmsec

#endif  // TPMSEC_STRUCTURES_H_
