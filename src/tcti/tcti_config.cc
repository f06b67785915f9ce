#include "tcti/tcti_config.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

namespace tpmsec::tcti {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace

Result<TctiConfig> parse_tcti_config(std::string_view config) {
  TctiConfig out;
  std::string tpm;
  bool anchor_set = false, salt_set = false, policy_set = false, log_set = false;
  auto once = [](bool& seen, std::string_view key) -> Status {
    if (seen) return usage_error(fmt::format("tpmsec TCTI: {} given twice", key));
    seen = true;
    return ok_status();
  };
  for (std::string_view item : split(config, ',')) {
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string value(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
    bool has_value = eq != std::string_view::npos && !value.empty();
    if (key == "null-name" || key == "ek-ca") {
      if (!has_value) return usage_error(fmt::format("tpmsec TCTI: {}= needs a value", key));
      TPMSEC_RETURN_IF_ERROR(once(anchor_set, "a trust anchor (null-name=, ek-ca=, tofu)"));
      if (key == "null-name") {
        out.request.anchor = anchor::NullName{value};
      } else {
        out.request.anchor = anchor::EkCa{value};
      }
    } else if (key == "tofu") {
      if (eq != std::string_view::npos) return usage_error("tpmsec TCTI: tofu takes no value");
      TPMSEC_RETURN_IF_ERROR(once(anchor_set, "a trust anchor (null-name=, ek-ca=, tofu)"));
      out.request.anchor = anchor::Tofu{};
    } else if (key == "salt") {
      TPMSEC_RETURN_IF_ERROR(once(salt_set, "salt="));
      if (value == "ecc") {
        out.request.salt = SaltKind::kEcc;
      } else if (value == "rsa") {
        out.request.salt = SaltKind::kRsa;
      } else {
        return usage_error(fmt::format("tpmsec TCTI: salt={} (ecc or rsa)", value));
      }
    } else if (key == "policy" || key == "log") {
      if (!has_value) return usage_error(fmt::format("tpmsec TCTI: {}= needs a file", key));
      TPMSEC_RETURN_IF_ERROR(once(key == "policy" ? policy_set : log_set, key));
      (key == "policy" ? out.request.policy : out.log) = value;
    } else {
      if (!tpm.empty()) tpm += ',';
      tpm += item;
    }
  }
  // Nothing named: the host's TPM through the kernel's resource manager, as
  // tpm2-tss's device TCTI defaults to (never the TCTI's own environment,
  // which may name this TCTI again).
  out.request.tpm = tpm.empty() ? "device:/dev/tpmrm0" : tpm;
  if (!log_set) {
    if (const char* env = std::getenv("TPMSEC_TCTI_LOG"); env && *env) out.log = env;
  }
  return out;
}

}  // namespace tpmsec::tcti
