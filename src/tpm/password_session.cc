#include "tpmsec/command_frame.h"
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
  // An empty nonce, continueSession, and the password as the hmac (a TPM2B_AUTH).
  return write_auth_entry(
      AuthEntry{.handle = rh::kPasswordSession, .attributes = attr::kContinueSession, .hmac = in.auth_value},
      /*command=*/true);
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
