// tpm_config.h: the one parser of a TPM string with protection items, and
// the default TPM with its items split off.
#include "tpmsec/tpm_config.h"

#include <fmt/format.h>

#include <cstdlib>

namespace tpmsec {

Result<TpmConfig> parse_tpm_config(std::string_view config) {
  TpmConfig out;
  bool anchor_set = false, salt_set = false, policy_set = false, log_set = false, strict_set = false;
  auto once = [](bool& seen, std::string_view key) -> Status {
    if (seen) return usage_error(fmt::format("{} given twice", key));
    seen = true;
    return ok_status();
  };
  size_t start = 0;
  for (bool last = false; !last;) {
    size_t at = config.find(',', start);
    last = at == std::string_view::npos;
    std::string_view item = config.substr(start, last ? std::string_view::npos : at - start);
    start = at + 1;
    // `\,` is /etc/crypttab's escape for a comma (docs/tcti.md): seen here,
    // nothing unescaped it, and the item would name a host or file ending
    // in a backslash.
    if (!item.empty() && item.back() == '\\') {
      return usage_error(
          fmt::format("item '{}' ends in a backslash: \\, is /etc/crypttab's escape for a comma; "
                      "everywhere else write the commas plain",
                      item));
    }
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string value(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    bool has_value = eq != std::string_view::npos && !value.empty();
    if (key == "null-name" || key == "ek-ca") {
      if (!has_value) return usage_error(fmt::format("{}= needs a value", key));
      TPMSEC_RETURN_IF_ERROR(once(anchor_set, "a trust anchor (null-name=, ek-ca=, tofu)"));
      (key == "null-name" ? out.null_name : out.ek_ca) = value;
    } else if (key == "tofu" || key == "strict") {
      if (eq != std::string_view::npos) return usage_error(fmt::format("{} takes no value", key));
      if (key == "tofu") {
        TPMSEC_RETURN_IF_ERROR(once(anchor_set, "a trust anchor (null-name=, ek-ca=, tofu)"));
        out.tofu = true;
      } else {
        TPMSEC_RETURN_IF_ERROR(once(strict_set, "strict"));
        out.strict = true;
      }
    } else if (key == "salt") {
      TPMSEC_RETURN_IF_ERROR(once(salt_set, "salt="));
      if (value != "ecc" && value != "rsa") return usage_error(fmt::format("salt={} (ecc or rsa)", value));
      out.salt = value;
    } else if (key == "policy" || key == "log") {
      if (!has_value) return usage_error(fmt::format("{}= needs a file", key));
      TPMSEC_RETURN_IF_ERROR(once(key == "policy" ? policy_set : log_set, key));
      (key == "policy" ? out.policy : out.log) = value;
    } else {
      if (!out.tpm.empty()) out.tpm += ',';
      out.tpm += item;
    }
  }
  return out;
}

ProtectRequest request_of(const TpmConfig& config) {
  ProtectRequest r;
  r.tpm = config.tpm;
  if (!config.null_name.empty()) r.anchor = anchor::NullName{config.null_name};
  if (!config.ek_ca.empty()) r.anchor = anchor::EkCa{config.ek_ca};
  if (config.tofu) r.anchor = anchor::Tofu{};
  if (config.salt == "ecc") r.salt = SaltKind::kEcc;
  if (config.salt == "rsa") r.salt = SaltKind::kRsa;
  r.policy = config.policy;
  return r;
}

std::string_view ChosenTpm::origin() const {
  if (tcti) return "TPM2TOOLS_TCTI";
  return source == TpmSource::kTpmsecTpm ? "TPMSEC_TPM" : "--tpm";
}

namespace {

// `text` split into its TPM string and items, the TPM string parsed
// (`parsed`, when it names one).
Result<TpmConfig> split_checked(std::string_view text, TpmSpec& parsed) {
  TPMSEC_ASSIGN_OR_RETURN(TpmConfig config, parse_tpm_config(text));
  if (!config.tpm.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(parsed, parse_transport_spec(config.tpm));
  }
  return config;
}

}  // namespace

Result<ChosenTpm> choose_tpm(const char* tpmsec_tpm, const char* tpm2tools_tcti, bool host_device) {
  TPMSEC_ASSIGN_OR_RETURN(DefaultTpm d, choose_default_tpm(tpmsec_tpm, tpm2tools_tcti, host_device));
  ChosenTpm out;
  out.source = d.source;
  out.tcti = d.tpmsec_tcti;
  if (d.tpmsec_tcti || d.source == TpmSource::kTpmsecTpm) {
    // Strings a user wrote in the grammar: the TPM string and items.
    Result<TpmConfig> config = split_checked(d.spec, out.parsed);
    if (!config.ok()) {
      const char* value = d.tpmsec_tcti ? tpm2tools_tcti : tpmsec_tpm;
      return usage_error(fmt::format("{}={}: {}", out.origin(), value, config.error().message()));
    }
    out.config = std::move(*config);
    // The tpmsec TCTI naming none opens the host's TPM through the kernel's
    // resource manager, as the TCTI does; TPMSEC_TPM is there to name one.
    if (out.config.tpm.empty() && !d.tpmsec_tcti) {
      return usage_error(fmt::format("TPMSEC_TPM={}: names no TPM", tpmsec_tpm));
    }
    if (out.config.tpm.empty()) out.config.tpm = std::string("device:") + kHostTpmDevice;
  } else {
    out.config.tpm = d.spec;
  }
  out.spec = out.config.tpm;
  if (out.parsed.kind == TpmKind::kNone) {
    TPMSEC_ASSIGN_OR_RETURN(out.parsed, parse_transport_spec(out.spec));
  }
  return out;
}

Result<ChosenTpm> chosen_tpm() {
  return choose_tpm(std::getenv("TPMSEC_TPM"), std::getenv("TPM2TOOLS_TCTI"), host_tpm_device());
}

Result<ChosenTpm> given_tpm(std::string_view text) {
  ChosenTpm out;
  out.source = TpmSource::kGiven;
  TPMSEC_ASSIGN_OR_RETURN(out.config, split_checked(text, out.parsed));
  if (out.config.tpm.empty()) return usage_error(fmt::format("'{}' names no TPM", text));
  out.spec = out.config.tpm;
  return out;
}

}  // namespace tpmsec
