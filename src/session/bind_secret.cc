#include "tpmsec/bind_secret.h"

#include <fmt/format.h>

#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/null_key.h"
#include "tpmsec/response_code.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/text.h"

namespace tpmsec {

NvPublic bind_index_public(uint32_t nv_index) {
  NvPublic p;
  p.nv_index = nv_index;
  p.name_alg = alg::kSha256;
  p.attributes = nv_attr::kAuthRead | nv_attr::kAuthWrite | nv_attr::kNoDa;
  p.data_size = 1;
  return p;
}

Result<Bytes> nv_index_name(const NvPublic& nv_public) { return compute_name(nv_public); }

Status undefine_bind_index(Tpm& tpm, uint32_t nv_index) {
  auto r = tpm.run(cmd::NvUndefineSpace{NamedHandle::of(rh::kOwner), NamedHandle::of(nv_index)}, {Auth::password()});
  if (!r.ok()) return r.error().with_context(fmt::format("NV_UndefineSpace(0x{:08x})", nv_index));
  return ok_status();
}

Result<BindSecret> provision_bind_secret(SessionFactory& factory, uint32_t nv_index) {
  if (!factory.salted()) {
    return usage_error("provisioning sends the bind secret to the TPM: it needs a session salted to a trusted key");
  }
  if ((nv_index >> 24) != ht::kNvIndex) {
    return usage_error(fmt::format("0x{:08x} is not an NV index handle (0x01xxxxxx)", nv_index));
  }
  Tpm& tpm = factory.tpm();
  BindSecret b;
  b.nv_index = nv_index;
  b.secret = SecretBytes(kBindSecretBytes);
  TPMSEC_RETURN_IF_ERROR(crypto::system_random().fill(b.secret.mutable_view()));
  const NvPublic pub = bind_index_public(nv_index);
  TPMSEC_ASSIGN_OR_RETURN(b.name, nv_index_name(pub));

  {
    // The secret is the first parameter: encrypted to the session's key.
    TPMSEC_ASSIGN_OR_RETURN(auto session, factory.start(attr::kDecrypt));
    cmd::NvDefineSpace define;
    define.auth_handle = NamedHandle::of(rh::kOwner);
    define.auth.bytes.assign(b.secret.view().begin(), b.secret.view().end());
    define.public_info.nv_public = pub;
    auto defined = tpm.run(define, {Auth{session.get(), {}}});
    secure_wipe(define.auth.bytes.data(), define.auth.bytes.size());
    if (!defined.ok()) {
      if (rc_base(defined.error().tpm_rc()) == rc::kNvDefined) {
        return usage_error(
            fmt::format("NV index 0x{:08x} is already defined: choose another with --nv-index, or "
                        "remove an earlier provisioning with 'tpmsec provision --remove'",
                        nv_index));
      }
      return defined.error().with_context(fmt::format("NV_DefineSpace(0x{:08x})", nv_index));
    }
  }

  // Proof that the TPM holds the secret: a session bound to the index, one
  // audited command whose response must verify under the bound key.
  SessionOptions options;
  NamedHandle bind{nv_index, b.name};
  options.bind = &bind;
  options.bind_auth = b.secret.view();
  options.attributes = attr::kAudit;
  options.symmetric = factory.config().symmetric;
  Status proven = [&]() -> Status {
    TPMSEC_ASSIGN_OR_RETURN(auto bound, HmacSession::start(tpm, options));
    auto r = tpm.run(cmd::GetRandom{8}, {Auth{bound.get(), {}}});
    if (!r.ok()) return r.error().with_context("the first command in a session bound to the new index");
    return ok_status();
  }();
  if (!proven.ok()) {
    (void)undefine_bind_index(tpm, nv_index);
    return proven.error();
  }
  return b;
}

}  // namespace tpmsec
