// The options every protected command shares: the salt, and the trust anchor
// of the salt key (docs/threat-model.md).
#ifndef TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
#define TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <string_view>

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

  // `tpm`: the command's TPM option; the protection items of its TPM
  // string (--tpm, $TPMSEC_TPM, $TPM2TOOLS_TCTI=tpmsec:…; tpm_config.h)
  // count as these flags (request()).
  void add_to(CLI::App* sub, TpmOption& tpm);
  // Only --null-name (commands that open no session of their own but can
  // check a pin: null-key).
  void add_null_name_to(CLI::App* sub, const char* help);

  // What these options ask of the protect path (protect.h), which resolves
  // the anchor: kUsage for two anchors or an empty --null-name. The items of
  // the TPM string count as flags: an anchor there and one here are two
  // anchors, a salt= or policy= unlike the flag's is kUsage; none is dropped.
  Result<ProtectRequest> request() const;
  // True when the user named an anchor (--null-name, --ek-ca or --tofu).
  bool anchor_given() const;
  // Where the TPM string's items came from, for flag_or_item()'s message
  // ("--tpm", "TPMSEC_TPM", "TPM2TOOLS_TCTI"; "the TPM string" before one
  // is resolved).
  std::string items_origin() const;
};

// The one rule for a flag and the TPM string's item that give the same
// thing (--salt and salt=, --policy and policy=; AppliedItems, cli.h):
// either alone is taken (empty: not given); both, unlike, are kUsage in one
// line naming both: "FLAG VALUE and FROM's ITEM=VALUE disagree".
Result<std::string> flag_or_item(std::string_view flag, const std::string& flag_value, std::string_view item,
                                 const std::string& item_value, std::string_view from);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
