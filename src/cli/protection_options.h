// The options every protected command shares: the salt, and the trust anchor
// of the salt key (docs/threat-model.md).
#ifndef TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
#define TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "tpmsec/session_factory.h"
#include "tpmsec/tpm_info.h"
#include "tpmsec/transport.h"

namespace tpmsec::cli {

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

  void add_to(CLI::App* sub);
  // Only --null-name (commands that open no session of their own but can
  // check a pin: null-key).
  void add_null_name_to(CLI::App* sub, const char* help);

  // The configuration these options select for the TPM behind `transport`
  // (the real one, not a decorator: its describe() keys the TOFU pin).
  // The salt key's anchor, strongest first: --ek-ca, --null-name, the
  // kernel's pin (device: transports, automatic), --tofu; none is needed
  // in_process(). Without one, SessionFactory::create refuses. What
  // `tpmsec provision` kept for this TPM takes their place when no anchor
  // option is given: a bind secret (sessions bound, not salted), else a
  // pinned persistent salt key (of the kind --salt asks for, if it asks).
  Result<ProtectionConfig> config(const Transport& transport, const TpmInfo& info, SymDef symmetric) const;
  // A session factory for `tpm`, with the null key created and pinned.
  Result<std::unique_ptr<SessionFactory>> factory(Tpm& tpm, const Transport& transport, const TpmInfo& info,
                                                  SymDef symmetric) const;
  // For commands that open no session: when the user gave an anchor, check
  // it anyway (one CreatePrimary of the null key) instead of ignoring it.
  Status verify_given_anchor(Tpm& tpm, const Transport& transport, const TpmInfo& info) const;
  // True when the user named an anchor (--null-name, --ek-ca or --tofu).
  bool anchor_given() const;
};

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_PROTECTION_OPTIONS_H_
