// The options every protected command shares: salt, pinned null-key name,
// EK CA bundle.
#ifndef TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
#define TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "tpmsec/session_factory.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec::cli {

struct ProtectionOptions {
  std::string salt = "auto";
  std::string null_name;
  std::string ek_ca;
  bool unsalted = false;

  void add_to(CLI::App* sub);
  // The configuration these options select for `info`'s TPM.
  Result<ProtectionConfig> config(const TpmInfo& info, SymDef symmetric) const;
  // A session factory for `tpm`, with the null key created and pinned.
  Result<std::unique_ptr<SessionFactory>> factory(Tpm& tpm, const TpmInfo& info, SymDef symmetric) const;
};

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
