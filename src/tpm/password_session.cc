#include "tpmsec/constants.h"
#include "tpmsec/session.h"
#include "tpmsec/wire.h"

namespace tpmsec {

Status Session::encrypt_parameter(MutableByteView, ByteView) {
  return unsupported_error("this session cannot encrypt parameters");
}

Status Session::decrypt_parameter(MutableByteView, ByteView) {
  return unsupported_error("this session cannot decrypt parameters");
}

uint32_t PasswordSession::handle() const { return rh::kPasswordSession; }

Result<Bytes> PasswordSession::authorize(const AuthorizeInput& in) {
  Writer w;
  w.u32(rh::kPasswordSession);
  w.tpm2b({}, "TPMS_AUTH_COMMAND.nonce");
  w.u8(attr::kContinueSession);
  w.tpm2b(in.auth_value, "TPMS_AUTH_COMMAND.hmac", 64);  // the password: a TPM2B_AUTH
  return w.finish();
}

Status PasswordSession::verify(const VerifyInput& in) {
  // Part 1 §19.6.5: the response to a password session is an empty nonce,
  // continueSession, and an empty hmac.
  if (!in.auth.nonce.empty() || !in.auth.hmac.empty() || in.auth.attributes != attr::kContinueSession) {
    return parse_error("malformed password session response");
  }
  return ok_status();
}

Auth Auth::password(ByteView password) {
  static PasswordSession session;
  return Auth{&session, password};
}

}  // namespace tpmsec
