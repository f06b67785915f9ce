// The authorization-session interface the command pipeline drives
// (Part 1 §19; modelled on go-tpm's Session).
//
// For each command the pipeline (Tpm::execute) asks the session carrying the
// decrypt attribute to encrypt the first parameter, then every session for its
// authorization entry; after the response it asks every session to verify
// its entry before anything is parsed, then the session carrying encrypt to
// decrypt the first response parameter. A session never sees bytes the
// pipeline has not bounds-checked.
#ifndef TPMSEC_SESSION_H_
#define TPMSEC_SESSION_H_

#include <cstdint>
#include <optional>
#include <span>

#include "tpmsec/bytes.h"
#include "tpmsec/command.h"
#include "tpmsec/result.h"

namespace tpmsec {

// What a session needs to authorize one command.
struct AuthorizeInput {
  const CommandInfo* info = nullptr;
  std::span<const NamedHandle* const> handles;  // every handle of the command (all enter cpHash)
  ByteView parameters;                          // parameter area as sent (after encryption)
  const NamedHandle* entity = nullptr;          // the handle this session authorizes, if any
  ByteView auth_value;                          // that entity's authValue
  ByteView decrypt_nonce;                       // nonceTPM of another session carrying decrypt (first session only)
  ByteView encrypt_nonce;                       // nonceTPM of another session carrying encrypt (first session only)
};

// TPMS_AUTH_RESPONSE as received (Part 2 §10.14).
struct AuthResponse {
  ByteView nonce;
  uint8_t attributes = 0;
  ByteView hmac;
};

// What a session needs to verify one response.
struct VerifyInput {
  const CommandInfo* info = nullptr;
  uint32_t response_code = 0;
  ByteView parameters;  // parameter area as received (before decryption)
  AuthResponse auth;
  ByteView auth_value;  // authValue of the entity this session authorized, if any
  // HierarchyChangeAuth and NV_ChangeAuth: the TPM computes the response
  // HMAC with the entity's authValue as the command left it, the new one
  // (libtpms SessionProcess.c, ComputeResponseHMAC reads it after the command
  // ran). Unset: the key the command was authorized with.
  std::optional<ByteView> new_auth_value;
};

class Session {
 public:
  virtual ~Session() = default;

  virtual uint32_t handle() const = 0;
  // True when this session carries the decrypt / encrypt attribute next command.
  virtual bool decrypts_command() const { return false; }
  virtual bool encrypts_response() const { return false; }
  // nonceTPM for the first session's HMAC when this session carries decrypt/encrypt.
  virtual ByteView nonce_tpm() const { return {}; }

  // Called once per command attempt before anything else: a session draws its
  // fresh nonceCaller here.
  virtual Status begin_command() { return ok_status(); }
  // Encrypts the data bytes of the first command parameter in place.
  virtual Status encrypt_parameter(MutableByteView data, ByteView auth_value);
  // Returns the marshalled TPMS_AUTH_COMMAND for this command.
  virtual Result<Bytes> authorize(const AuthorizeInput& in) = 0;
  // Authenticates the response; must fail closed. Called only for success responses.
  virtual Status verify(const VerifyInput& in) = 0;
  // Decrypts the data bytes of the first response parameter in place (after verify).
  virtual Status decrypt_parameter(MutableByteView data, ByteView auth_value);
  // The command failed with `response_code` (no session area came back).
  virtual void command_failed(uint32_t response_code) { (void)response_code; }
  // False while no response in this session has been authenticated yet: the
  // session key is then only as good as the StartAuthSession answer it came
  // from, which nothing authenticates. The pipeline treats the TPM rejecting
  // such a session's HMAC as tampering (tpm.h).
  virtual bool key_confirmed() const { return true; }
};

// Password authorization (TPM_RS_PW): the authValue travels in the clear.
// Stateless; one instance serves every command.
class PasswordSession final : public Session {
 public:
  uint32_t handle() const override;
  Result<Bytes> authorize(const AuthorizeInput& in) override;
  Status verify(const VerifyInput& in) override;
};

// One session in a command, with the authValue of the entity it authorizes.
struct Auth {
  Session* session = nullptr;
  ByteView auth_value;

  // Password authorization with `password` (empty by default).
  static Auth password(ByteView password = {});
};

}  // namespace tpmsec

#endif  // TPMSEC_SESSION_H_
