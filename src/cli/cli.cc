#include "cli.h"

#include <fmt/format.h>

#include "tpmsec/constants.h"

namespace tpmsec::cli {

int exit_code_for(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::kUsage: return kExitUsage;
    case ErrorKind::kIntegrity: return kExitIntegrity;
    default: return kExitRuntime;
  }
}

void TpmOption::add_to(CLI::App* sub) {
  spec = default_transport_spec();
  sub->add_option("--tpm", spec,
                  "TPM to use (tpm2-tss TCTI syntax): embedded[:state=DIR], swtpm:host=H,port=P[,ctrl=P2], "
                  "swtpm:path=SOCKET, device:/dev/tpmrm0. Default: $TPMSEC_TPM or embedded")
      ->capture_default_str();
}

Result<OpenTpm> open_tpm(const TpmOption& option) {
  OpenTpm out;
  TPMSEC_ASSIGN_OR_RETURN(out.transport, open_transport(option.spec));
  out.tpm = std::make_unique<Tpm>(*out.transport);
  return out;
}

Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const TpmOption& option, const std::string& emulate) {
  TPMSEC_ASSIGN_OR_RETURN(auto m, tpmsec::open_measured_tpm(option.spec, emulate));
  if (!m->warning.empty()) fmt::print(stderr, "tpmsec: warning: {}\n", m->warning);
  return m;
}

Result<uint32_t> parse_pcr_index(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos) {
    return usage_error(fmt::format("PCR index must be a decimal number, got '{}'", text));
  }
  return static_cast<uint32_t>(std::stoul(text));
}

Result<uint16_t> parse_bank(const std::string& text) {
  auto bank = hash_from_name(text);
  if (!bank) return usage_error(fmt::format("unknown PCR bank '{}' (expected sha1, sha256, sha384 or sha512)", text));
  return *bank;
}

}  // namespace tpmsec::cli
