// HMAC authorization sessions (Part 1 §19.6): salted, bound or neither,
// with AES-CFB or XOR parameter encryption and response authentication.
//
// An HmacSession is a Session the pipeline (tpm.h) drives: per command it
// draws a fresh nonceCaller, computes cpHash over every handle's name and the
// parameters as sent, HMACs with sessionKey || authValue, and authenticates
// the response (rpHash, constant-time compare) before anything from it is
// used; the nonceTPM rolls only after a verified response. A failed
// verification leaves the session unusable (integrity error).
//
// The session's TPM handle is owned (by the Tpm's handle ledger: see
// handle_ledger.h): it is flushed on destruction unless the TPM already ended
// it (a command without continueSession succeeded, as its authenticated
// response said) or it was abandoned.
#ifndef TPMSEC_HMAC_SESSION_H_
#define TPMSEC_HMAC_SESSION_H_

#include <memory>
#include <optional>

#include "tpmsec/crypto.h"
#include "tpmsec/scoped_handle.h"
#include "tpmsec/session.h"
#include "tpmsec/structures.h"

namespace tpmsec {

// cpHash = H(commandCode || name_1 ... name_n || parameters) (Part 1 §18.7).
Result<Bytes> compute_cp_hash(uint16_t hash_alg, uint32_t command_code, std::span<const NamedHandle* const> handles,
                              ByteView parameters);
// rpHash = H(responseCode || commandCode || parameters) (Part 1 §18.8).
Result<Bytes> compute_rp_hash(uint16_t hash_alg, uint32_t response_code, uint32_t command_code, ByteView parameters);
// The same into `out` (at least the digest's size), allocating nothing; they return the digest's size.
Result<size_t> compute_cp_hash(uint16_t hash_alg, uint32_t command_code, std::span<const NamedHandle* const> handles,
                               ByteView parameters, MutableByteView out);
Result<size_t> compute_rp_hash(uint16_t hash_alg, uint32_t response_code, uint32_t command_code, ByteView parameters,
                               MutableByteView out);
// authValue with trailing zero bytes removed (Part 1 §19.6.5); interior zeros stay.
ByteView trim_auth_value(ByteView auth_value);

struct SessionOptions {
  // Salt: the loaded key (with its public area) to encrypt the salt to.
  // Without one the session is unsalted: it authenticates, but an interposer
  // who saw StartAuthSession can compute its key (measurement only).
  const NamedHandle* tpm_key = nullptr;
  const Public* tpm_key_public = nullptr;
  // Bind: an entity and its authValue; the session key then depends on it.
  const NamedHandle* bind = nullptr;
  ByteView bind_auth;
  uint16_t auth_hash = alg::kSha256;
  SymDef symmetric = SymDef::aes128_cfb();
  // Attributes for every command: continueSession, decrypt, encrypt, audit.
  uint8_t attributes = attr::kContinueSession;
  // Default: the system RNG for the session start, then the calling
  // thread's nonce_random() for each command's nonceCaller.
  crypto::RandomSource* random = nullptr;
};

class HmacSession final : public Session {
 public:
  // StartAuthSession (salted if options.tpm_key, bound if options.bind).
  static Result<std::unique_ptr<HmacSession>> start(Tpm& tpm, const SessionOptions& options);

  // Rebuilds a session from its parts (transcript replay, context load).
  HmacSession(Tpm* tpm, uint32_t handle, uint16_t auth_hash, SymDef symmetric, SecretBytes session_key, Bytes nonce_tpm,
              Bytes bind_name, uint8_t attributes, crypto::RandomSource* random);
  ~HmacSession() override;

  uint32_t handle() const override { return handle_.get() ? handle_.get() : released_handle_; }
  bool decrypts_command() const override { return attributes_ & attr::kDecrypt; }
  bool encrypts_response() const override { return attributes_ & attr::kEncrypt; }
  ByteView nonce_tpm() const override { return nonce_tpm_; }
  uint16_t auth_hash() const { return auth_hash_; }

  Status begin_command() override;
  Status encrypt_parameter(MutableByteView data, ByteView auth_value) override;
  Result<Bytes> authorize(const AuthorizeInput& in) override;
  Status verify(const VerifyInput& in) override;
  // The response HMAC the TPM computes for `in` (in.auth.hmac unused) under
  // the key the last command was authorized with: what verify() compares, and
  // what a CommandWrapper (wrap.h) gives a caller whose session it re-signed.
  Result<Bytes> response_hmac(const VerifyInput& in) const;
  Status decrypt_parameter(MutableByteView data, ByteView auth_value) override;
  void command_failed(uint32_t response_code) override;
  bool key_confirmed() const override { return key_confirmed_; }

  // Attributes of the next commands.
  uint8_t attributes() const { return attributes_; }
  void set_attributes(uint8_t attributes) { attributes_ = attributes; }

  // False once the TPM ended the session or a response failed verification.
  bool usable() const { return usable_; }
  // The nonceCaller of the last command (tests, transcripts).
  ByteView nonce_caller() const { return nonce_caller_; }

  // ContextSave the session. The session stays owned: destroying it flushes
  // the saved context too (FlushContext works on saved sessions), so an
  // abandoned saved session never holds one of the TPM's active-session slots.
  Result<Context> save(Tpm& tpm);
  // ContextLoad a context saved by save(). A response naming another handle
  // is kIntegrity; on any failure the session may be saved or loaded, and
  // flush() ends it either way.
  Status load(Tpm& tpm, const Context& context);
  // FlushContext now (no-op when the TPM already ended the session).
  Status flush();
  // Forget the handle without flushing: only when the TPM is known not to
  // have it any more (after a reset), or the caller flushes it itself.
  void abandon();

 private:
  // The benchmark that times host work rebuilds a live session from its key
  // (bench/session_bench.cc); nothing else reads a session key.
  friend struct SessionKeyForBenchmark;

  ByteView session_key() const { return session_key_.view(); }
  // sessionKey || authValue (trimmed), optionally without the authValue.
  SecretBytes key_with(ByteView auth_value) const;
  // Whether hmac_key_ is sessionKey || auth (auth trimmed), compared in constant time.
  bool keyed_with(ByteView auth) const;
  // Prepares hmac_key_ for sessionKey || auth unless it is that key already.
  Status key_for_command(ByteView auth);
  // rpHash into out; returns its size. A parameterless response's is remembered (rp_memo_).
  Result<size_t> rp_hash(const VerifyInput& in, MutableByteView out) const;
  // The response HMAC into out; returns its size.
  Result<size_t> response_mac(const VerifyInput& in, MutableByteView out) const;
  Status crypt_parameter(MutableByteView data, ByteView auth_value, bool command_direction, bool encrypt);

  ScopedHandle handle_;
  uint32_t released_handle_ = 0;
  uint16_t auth_hash_;
  SymDef symmetric_;
  SecretBytes session_key_;
  Bytes nonce_tpm_;
  Bytes nonce_caller_;
  Bytes bind_name_;  // empty when unbound
  uint8_t attributes_;
  crypto::RandomSource* random_;  // null: crypto::nonce_random()
  SecretBytes last_hmac_key_;     // the key the last command was HMAC'd with; the response uses it too
  crypto::HmacKey hmac_key_;      // that key prepared: set up again only when the authValue changes
  uint8_t sent_attributes_ = 0;
  bool usable_ = true;
  bool key_confirmed_ = false;  // a response of this session verified
  // rpHash of the last parameterless response: H(responseCode || commandCode), public.
  struct RpHashMemo {
    uint32_t response_code = 0;
    uint32_t command_code = 0;
    uint8_t size = 0;         // 0: none yet
    uint8_t digest[64] = {};  // up to SHA-512
  };
  mutable RpHashMemo rp_memo_;
};

}  // namespace tpmsec

#endif  // TPMSEC_HMAC_SESSION_H_
