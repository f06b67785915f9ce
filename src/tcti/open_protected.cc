// INTERIM until ProtectedTpm::open (tpmsec/protect.h) is on main: the TPM
// opened with open_transport() and the factory created from the anchor the
// request names. Replaced by ProtectedTpm::open, which resolves the anchor
// for the CLI and the TCTI alike.
#include "tcti/open_protected.h"

#include <fmt/format.h>

#include "tpmsec/null_key.h"

namespace tpmsec::tcti {

Result<ProtectedSessions> open_protected(const ProtectRequest& request) {
  ProtectedSessions out;
  TPMSEC_ASSIGN_OR_RETURN(out.transport, open_transport(request.tpm));
  out.tpm = std::make_unique<Tpm>(*out.transport);
  ProtectionConfig config;
  config.salt = request.salt;
  if (const auto* n = std::get_if<anchor::NullName>(&request.anchor)) {
    TPMSEC_ASSIGN_OR_RETURN(config.pinned_null_name, parse_null_name(n->value));
    config.pin_origin = "null-name=";
  } else if (const auto* e = std::get_if<anchor::EkCa>(&request.anchor)) {
    config.ek_ca = e->bundle;
  } else if (std::holds_alternative<anchor::Tofu>(request.anchor)) {
    config.trust_first_use = true;
  }
  TPMSEC_ASSIGN_OR_RETURN(out.factory, SessionFactory::create(*out.tpm, config));
  return out;
}

}  // namespace tpmsec::tcti
