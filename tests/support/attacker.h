// The interposer that owns the salt key (issue 10, "null-key substitution"):
// a rule for the Interposer with its own P-256 key pair that plays the TPM
// for everything a salted session rests on, and forwards the rest.
//
//   CreatePrimary(TPM_RH_NULL, ECC P-256)  answered with the project's
//       null_key_template carrying the attacker's point, and the matching
//       name (compute_name): every check a client makes on a public area
//       it cannot authenticate passes. (Or CreatePrimary(TPM_RH_ENDORSEMENT)
//       with options.hierarchy: the EK the client asked for, with the
//       attacker's point.)
//   ContextSave / ContextLoad / FlushContext / ReadPublic of that object,
//       and of the attacker's sessions: answered from its own bookkeeping.
//   StartAuthSession salted to that object: the salt recovered by ECDH with
//       the attacker's private key and KDFe(nameAlg, Z, "SECRET", Q_e.x,
//       Q_key.x) (Part 1 §11.4.10.3, C.6), the session key derived as the
//       TPM would, KDFa(authHash, salt, "ATH", nonceTPM, nonceCaller)
//       (Part 1 §19.6.8); the session is the attacker's, not the TPM's.
//   Any command in such a session: parameter decryption undone (AES-CFB or
//       XOR, §21), the command sent to the real TPM with password sessions
//       instead (PCR_Extend with `substitute_digest` in place of every
//       digest), and the TPM's answer returned with the response parameters
//       encrypted and a response HMAC over rpHash, a fresh nonceTPM, the
//       client's nonceCaller and the attributes (Part 1 §19.6.10-§19.6.11,
//       what HmacSession::verify checks).
//   PCR_Extend under a password session also gets the substituted digest.
//   GetCapability(TPM_CAP_HANDLES) lists the attacker's object and sessions
//       among the TPM's, so a client that checks its handles exist sees them.
//
// All secrets are computed with the project's crypto (tpmsec/crypto.h) and
// the formulas of src/session/hmac_session.cc, so a client that accepts the
// attacker's key accepts everything that follows. The only defence is not
// accepting the key: a pinned name, an EK-certified key, a TOFU pin.
//
// Not thread-safe; it runs on the interposer's thread (read its counters
// after Interposer::wait_idle()).
#ifndef TPMSEC_TESTS_SUPPORT_ATTACKER_H_
#define TPMSEC_TESTS_SUPPORT_ATTACKER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "support/interposer.h"
#include "support/tpm_frames.h"
#include "tpmsec/crypto.h"
#include "tpmsec/structures.h"

namespace tpmsec::testing {

struct AttackerOptions {
  // Replaces the digest of every PCR_Extend the client sends (empty: kept).
  Bytes substitute_digest;
  // The hierarchy whose P-256 CreatePrimary the attacker answers with its
  // own key: the null key's, or TPM_RH_ENDORSEMENT to stand in for an ECC EK
  // (answered with the template the client asked for, carrying the
  // attacker's point, and that area's name).
  uint32_t hierarchy = rh::kNull;
  // The handle reported for "the null key" and the first of the sessions.
  uint32_t object_handle = 0x80000100;
  uint32_t first_session_handle = 0x02000100;
};

struct AttackerCounters {
  size_t keys_substituted = 0;     // CreatePrimary answered with the attacker's key
  size_t salts_recovered = 0;      // StartAuthSession salted to it
  size_t responses_forged = 0;     // responses HMAC'd with a session key of the attacker's
  size_t extends_substituted = 0;  // PCR_Extend forwarded with substitute_digest
};

class NullKeyAttacker {
 public:
  static Result<std::unique_ptr<NullKeyAttacker>> create(AttackerOptions options);

  // The rule to install on an Interposer; the attacker must outlive it.
  Rule rule();
  Reply handle(const ProxiedCommand& command, Upstream& tpm);

  const Public& public_area() const { return public_; }
  const Bytes& name() const { return name_; }
  const AttackerCounters& counters() const { return counters_; }
  // The first thing the attacker failed to do (a bug in the test, not a defence), or empty.
  const std::string& error() const { return error_; }

 private:
  struct FakeSession {
    uint16_t auth_hash = 0;
    SymDef symmetric;
    SecretBytes key;
    Bytes nonce_tpm;
  };

  explicit NullKeyAttacker(AttackerOptions options) : options_(std::move(options)) {}

  // Whether the attacker's key is "loaded": listings show it only then, as a
  // TPM's would (a handle listed before it is created gives the attack away).
  bool object_loaded_ = false;
  bool owns(uint32_t handle) const { return handle == options_.object_handle || sessions_.count(handle) > 0; }
  Result<Reply> dispatch(const CommandFrame& frame, const ProxiedCommand& command, Upstream& tpm);
  Result<Reply> list_with_fakes(const CommandFrame& frame, const ProxiedCommand& command, Upstream& tpm);
  Result<Reply> create_primary(const CommandFrame& frame, const ProxiedCommand& command, Upstream& tpm);
  Result<Reply> start_auth_session(const CommandFrame& frame);
  Result<Reply> context_save(const CommandFrame& frame, uint32_t handle);
  Result<Reply> in_fake_sessions(const CommandFrame& frame, Upstream& tpm);
  Result<Bytes> substitute_digests(ByteView parameters);
  Status crypt(FakeSession& s, MutableByteView data, ByteView newer, ByteView older, bool encrypt);

  AttackerOptions options_;
  SecretBytes private_key_;
  Public public_;
  Bytes name_;
  std::map<uint32_t, FakeSession> sessions_;
  uint32_t next_session_;
  uint64_t context_sequence_ = 1;
  AttackerCounters counters_;
  std::string error_;
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_ATTACKER_H_
