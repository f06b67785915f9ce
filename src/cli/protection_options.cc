#include "protection_options.h"

#include <fmt/format.h>

#include "cli.h"
#include "tpmsec/tpm_config.h"

namespace tpmsec::cli {

void ProtectionOptions::add_to(CLI::App* sub, TpmOption& tpm_option) {
  tpm = &tpm_option;
  tpm_option.applies.protection = true;
  sub->add_option("--salt", salt,
                  "Salt the session to the null key with ecc (P-256 ECDH, as Linux), rsa (RSA-2048 OAEP), or auto "
                  "(ecc unless the TPM lacks P-256)")
      ->check(CLI::IsMember({"auto", "ecc", "rsa"}))
      ->capture_default_str();
  add_null_name_to(sub,
                   "Trust the salt key by its pinned name: 68 hex digits, or a file in the kernel's format such as "
                   "/sys/class/tpm/tpm0/null_name (read automatically for device: TPMs when present). A different "
                   "name is an integrity failure (exit 3)");
  sub->add_flag("--tofu", tofu,
                "Trust the null key seen at the first use of this boot and keep its name in the state directory "
                "($TPMSEC_STATE_DIR); later uses must match it. Weaker than --null-name: an interposer present at "
                "that first use wins. Forget it with 'tpmsec null-key --forget'");
  // The path is checked here (exit 2 when missing); its certificates when a
  // session is first salted.
  sub->add_option("--ek-ca", ek_ca,
                  "Salt sessions to the TPM's endorsement key, proven by its EK certificate (EK extended key usage, "
                  "not a CA) chaining to a root CA of this bundle (a PEM file or a directory of PEM files). The EK "
                  "is pinned for this TPM string on first use and, for device: TPMs, tied to the kernel's null_name "
                  "pin. A certificate that does not verify, an EK that is not the certified key, or another EK than "
                  "the pinned one is an integrity failure (exit 3); forget the pin with 'tpmsec null-key --forget'")
      ->check(CLI::ExistingPath)
      ->option_text("FILE|DIR");
  sub->add_flag("--unsalted", unsalted,
                "Unsalted session: authenticates, but gives NO protection against an interposer who saw the "
                "session start (for measurement only)");
}

void ProtectionOptions::add_null_name_to(CLI::App* sub, const char* help) {
  null_name_option = sub->add_option("--null-name", null_name, help);
}

std::string ProtectionOptions::items_origin() const {
  if (!tpm || !tpm->resolved().ok()) return "the TPM string";
  return std::string(tpm->resolved()->chosen.origin());
}

bool ProtectionOptions::anchor_given() const {
  return (null_name_option && null_name_option->count() > 0) || tofu || !ek_ca.empty();
}

Result<ProtectRequest> ProtectionOptions::request() const {
  ProtectRequest r;
  r.use_provisioned = use_provisioned;
  std::string salt_kind = salt;
  const bool named = null_name_option && null_name_option->count() > 0;
  if (named && null_name.empty()) {
    return usage_error("--null-name is empty: give the null key's name (68 hex digits) or a file holding it");
  }
  if (int(named) + int(tofu) + int(!ek_ca.empty()) > 1) {
    return usage_error("give one trust anchor: --ek-ca, --null-name or --tofu");
  }
  if (unsalted && !ek_ca.empty()) return usage_error("--ek-ca salts sessions to the EK: it cannot go with --unsalted");
  if (named) r.anchor = anchor::NullName{null_name};
  if (tofu) r.anchor = anchor::Tofu{};
  if (!ek_ca.empty()) r.anchor = anchor::EkCa{ek_ca};
  // The TPM string's items (--tpm, $TPMSEC_TPM, $TPM2TOOLS_TCTI=tpmsec:…:
  // one grammar, tpm_config.h) as if they were flags; where both give the
  // same thing differently, one usage line naming both.
  if (tpm) {
    TPMSEC_ASSIGN_OR_RETURN(ChosenTpm chosen, tpm->chosen());
    const TpmConfig& items = chosen.config;
    const std::string_view from = chosen.origin();
    if (items.anchor() && anchor_given()) {
      return usage_error(
          fmt::format("give one trust anchor: {} names one (null-name=, ek-ca= or tofu) and so does "
                      "--ek-ca, --null-name or --tofu",
                      from));
    }
    if (unsalted && !items.ek_ca.empty()) {
      return usage_error(fmt::format("{}'s ek-ca= salts sessions to the EK: it cannot go with --unsalted", from));
    }
    ProtectRequest given = request_of(items);
    if (items.anchor()) r.anchor = given.anchor;
    TPMSEC_ASSIGN_OR_RETURN(std::string agreed,
                            flag_or_item("--salt", salt == "auto" ? "" : salt, "salt", items.salt, from));
    if (!agreed.empty()) salt_kind = agreed;
    r.policy = items.policy;  // apply_policy_option() holds a --policy to the same rule
  }
  if (salt_kind == "ecc") r.salt = SaltKind::kEcc;
  if (salt_kind == "rsa") r.salt = SaltKind::kRsa;
  // Unsalted sessions have no salt key: an anchor for one is moot.
  if (unsalted) r.anchor = anchor::Unsalted{};
  return r;
}

Result<std::string> flag_or_item(std::string_view flag, const std::string& flag_value, std::string_view item,
                                 const std::string& item_value, std::string_view from) {
  if (!flag_value.empty() && !item_value.empty() && flag_value != item_value) {
    return usage_error(fmt::format("{} {} and {}'s {}={} disagree", flag, flag_value, from, item, item_value));
  }
  return flag_value.empty() ? item_value : flag_value;
}

}  // namespace tpmsec::cli
