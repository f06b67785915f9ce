#include "tcti/cut_config.h"

#include <fmt/format.h>

namespace tpmsec::tcti {

Status refuse_cut_config(const TpmConfig& config) {
  if (config.tpm.empty() || config.anchor()) return ok_status();
  Result<TpmSpec> spec = parse_transport_spec(config.tpm);
  if (!spec.ok()) return ok_status();  // refused later, naming what is wrong with it
  if (spec->kind != TpmKind::kSwtpm && spec->kind != TpmKind::kMssim) return ok_status();
  if (spec->options.count("port") || spec->options.count("path")) return ok_status();
  return usage_error(fmt::format(
      "'{}' names no port= and no anchor: the configuration looks cut at a comma (/etc/crypttab "
      "splits its options at commas: write each comma inside tpm2-device= as \\,); give port= for the default port",
      config.tpm));
}

}  // namespace tpmsec::tcti
