// The options every protected command shares: the salt, and the trust anchor
// of the salt key (docs/threat-model.md).
#ifndef TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
#define TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "tpmsec/protect.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/tpm_info.h"
#include "tpmsec/transport.h"

namespace tpmsec::cli {

struct TpmOption;  // cli.h

struct ProtectionOptions {
  std::string salt = "auto";
  std::string null_name;
  bool tofu = false;
  std::string ek_ca;
  bool unsalted = false;
  CLI::Option* null_name_option = nullptr;
  // Use what `tpmsec provision` kept for the TPM (a bind secret, else a
  // pinned persistent salt key) when no anchor option was given. Off for
  // commands that are about the salt key itself (null-key, provision).
  bool use_provisioned = true;
  const TpmOption* tpm = nullptr;

  // `tpm`: the command's TPM option; without --tpm, the protection items
  // of $TPM2TOOLS_TCTI=tpmsec:… count as these flags (request()).
  void add_to(CLI::App* sub, TpmOption& tpm);
  // Only --null-name (commands that open no session of their own but can
  // check a pin: null-key).
  void add_null_name_to(CLI::App* sub, const char* help);

  // What these options ask of the protect path (protect.h), which resolves
  // the anchor: kUsage for two anchors or an empty --null-name. The items of
  // $TPM2TOOLS_TCTI=tpmsec:… (without --tpm) count as flags: an anchor there
  // and one here are two anchors, a salt= or policy= unlike the flag's is
  // kUsage; none is dropped.
  Result<ProtectRequest> request() const;
  // The configuration these options select for the TPM behind `transport`
  // (the real one, not a decorator: its describe() keys the pins), resolved
  // by the protect path (resolve_protection): for commands that drive a Tpm
  // of their own.
  Result<ProtectionConfig> config(const Transport& transport, const TpmInfo& info, SymDef symmetric) const;
  // True when the user named an anchor (--null-name, --ek-ca or --tofu).
  bool anchor_given() const;
};

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
