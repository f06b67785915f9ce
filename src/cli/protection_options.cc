#include "protection_options.h"

#include <fmt/format.h>

namespace tpmsec::cli {

void ProtectionOptions::add_to(CLI::App* sub) {
  sub->add_option("--salt", salt,
                  "Salt the session to the null key with ecc (P-256 ECDH, as Linux), rsa (RSA-2048 OAEP), or auto "
                  "(ecc unless the TPM lacks P-256)")
      ->check(CLI::IsMember({"auto", "ecc", "rsa"}))
      ->capture_default_str();
  sub->add_option("--null-name", null_name,
                  "Pin the null key's name: 68 hex digits, or a file in the kernel's format such as "
                  "/sys/class/tpm/tpm0/null_name. A different name is an integrity failure (exit 3)");
  // The path is checked here (exit 2 when missing); its certificates when a
  // session is first salted.
  sub->add_option("--ek-ca", ek_ca,
                  "Salt sessions to the TPM's endorsement key, proven by its EK certificate chaining to this CA "
                  "bundle (a PEM file or a directory of PEM files). A certificate that does not verify, or an EK "
                  "that is not the certified key, is an integrity failure (exit 3)")
      ->check(CLI::ExistingPath)
      ->option_text("FILE|DIR");
  sub->add_flag("--unsalted", unsalted,
                "Unsalted session: authenticates, but gives NO protection against an interposer who saw the "
                "session start (for measurement only)");
}

Result<ProtectionConfig> ProtectionOptions::config(const TpmInfo& info, SymDef symmetric) const {
  ProtectionConfig config;
  config.symmetric = symmetric;
  config.unsalted = unsalted;
  if (salt == "ecc") config.salt = SaltKind::kEcc;
  if (salt == "rsa") config.salt = SaltKind::kRsa;
  if (config.salt == SaltKind::kEcc && !info.ecc_p256) {
    return unsupported_error("this TPM does not support ECC P-256: use --salt rsa");
  }
  if (!null_name.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes pinned, parse_null_name(null_name));
    config.pinned_null_name = std::move(pinned);
  }
  if (unsalted && !ek_ca.empty()) return usage_error("--ek-ca salts sessions to the EK: it cannot go with --unsalted");
  config.ek_ca = ek_ca;
  if (unsalted) fmt::print(stderr, "tpmsec: warning: unsalted session: no protection against a bus interposer\n");
  return config;
}

Result<std::unique_ptr<SessionFactory>> ProtectionOptions::factory(Tpm& tpm, const TpmInfo& info,
                                                                    SymDef symmetric) const {
  TPMSEC_ASSIGN_OR_RETURN(ProtectionConfig c, config(info, symmetric));
  return SessionFactory::create(tpm, c, &info);
}

}  // namespace tpmsec::cli
