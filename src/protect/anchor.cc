// Anchor resolution (protect.h): the one place that turns what a front end
// asked for into the ProtectionConfig sessions are started with, in the
// order protect.h documents.
#include <fmt/format.h>

#include <map>

#include "notice.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/host_state.h"
#include "tpmsec/protect.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec {
namespace {

// The device path behind a TPM string, when it is a device: transport.
std::string device_path_of(const Transport& transport) {
  const TpmSpec spec = transport.spec();
  if (spec.kind != TpmKind::kDevice) return "";
  return spec.path.empty() ? "/dev/tpm0" : spec.path;
}

}  // namespace

Status pin_ek(const std::shared_ptr<HostState>& host, const TpmId& tpm, const Notice& notice,
              ProtectionConfig& config) {
  // The boot matters only to a kernel pin's proof (device: TPMs).
  std::string boot;
  if (config.pinned_null_name) {
    TPMSEC_ASSIGN_OR_RETURN(boot, host->boot_id());
  }
  for (SaltKind kind : {SaltKind::kEcc, SaltKind::kRsa}) {
    TPMSEC_ASSIGN_OR_RETURN(std::optional<EkPinRecord> record, host->ek_pin(tpm, kind));
    if (!record) continue;
    bool proven = config.pinned_null_name && record->null_boot == boot && record->null_name == *config.pinned_null_name;
    config.ek_pins.push_back(EkPin{kind, record->name, proven});
  }
  config.ek_pin_origin = fmt::format(
      "if this TPM was replaced on purpose, forget its EK pin ({}) with 'tpmsec null-key "
      "--forget --tpm {}'",
      host->where(StateRecord::kEkPin), tpm.text);
  // Every factory of this process sees the same EK: one pin, one name.
  auto seen = std::make_shared<std::map<SaltKind, Bytes>>();
  std::optional<Bytes> null_name = config.pinned_null_name;
  config.on_ek_verified = [host, tpm, boot, null_name, seen, notice](const EkPin& ek) -> Status {
    auto [at, first] = seen->emplace(ek.kind, ek.name);
    if (!first && at->second != ek.name) {
      return integrity_error(
          fmt::format("the EK changed from {} to {} within one run", to_hex(at->second), to_hex(ek.name)));
    }
    TPMSEC_ASSIGN_OR_RETURN(std::optional<EkPinRecord> record, host->ek_pin(tpm, ek.kind));
    if (record && record->name != ek.name) {
      return integrity_error(fmt::format("the EK pinned for {} in {} is {}, not {}", tpm.text,
                                         host->where(StateRecord::kEkPin, tpm, ek.kind), to_hex(record->name),
                                         to_hex(ek.name)));
    }
    EkPinRecord updated = record ? *record : EkPinRecord{ek.name, "", {}};
    if (ek.null_key_proven && null_name) {
      updated.null_boot = boot;
      updated.null_name = *null_name;
    }
    if (!record) {
      say(notice, fmt::format("pinned the EK {} for {} on its first verified use (in {})", to_hex(ek.name), tpm.text,
                              host->where(StateRecord::kEkPin, tpm, ek.kind)));
    }
    return host->put_ek_pin(tpm, ek.kind, updated);
  };
  return ok_status();
}

namespace {

// Tofu: the pin kept this boot, else trust on this first use and keep it.
Status pin_first_use(const std::shared_ptr<HostState>& host, const TpmId& tpm, SaltKind kind, const Notice& notice,
                     ProtectionConfig& config) {
  TPMSEC_ASSIGN_OR_RETURN(std::string boot, host->boot_id());
  TPMSEC_ASSIGN_OR_RETURN(std::optional<NullKeyPin> pin, host->null_key_pin(tpm, kind));
  // A pin of an earlier boot is stale: this use is the first of this boot.
  if (pin && pin->boot_id == boot) {
    config.pinned_null_name = std::move(pin->name);
    config.pin_origin = fmt::format(
        "tofu ({}); if the TPM was reset on purpose, forget the pin with "
        "'tpmsec null-key --forget --tpm {}'",
        host->where(StateRecord::kNullKeyPin, tpm, kind), tpm.text);
    return ok_status();
  }
  config.trust_first_use = true;
  // Every factory of this process (the policy's audited read, the stream)
  // sees the same first use: one pin, one warning, one name.
  auto seen = std::make_shared<std::optional<Bytes>>();
  config.on_first_use = [host, tpm, boot, kind, seen, notice](const Bytes& name) -> Status {
    if (*seen) {
      if (**seen == name) return ok_status();
      return integrity_error(
          fmt::format("null key name changed from {} to {} within one run (tofu)", to_hex(**seen), to_hex(name)));
    }
    *seen = name;
    // "tofu": the CLI's --tofu and the TCTI's item alike.
    say(notice, fmt::format("warning: tofu: trusting the null key {} on first use for {} this boot; an "
                            "interposer present now would go unnoticed (pinned in {})",
                            to_hex(name), tpm.text, host->where(StateRecord::kNullKeyPin, tpm, kind)));
    return host->put_null_key_pin(tpm, kind, NullKeyPin{name, boot});
  };
  return ok_status();
}

}  // namespace

std::string_view anchor_name(const Anchor& anchor) {
  struct Name {
    std::string_view operator()(const anchor::Automatic&) const { return "automatic"; }
    std::string_view operator()(const anchor::NullName&) const { return "null-name"; }
    std::string_view operator()(const anchor::EkCa&) const { return "ek-ca"; }
    std::string_view operator()(const anchor::Tofu&) const { return "tofu"; }
    std::string_view operator()(const anchor::Unsalted&) const { return "unsalted"; }
  };
  return std::visit(Name{}, anchor);
}

std::shared_ptr<HostState> host_state_of(const ProtectRequest& request) {
  return request.host ? request.host : std::make_shared<FileHostState>(default_state_dir());
}

Result<ProtectionConfig> resolve_protection(const ProtectRequest& request, const Transport& transport,
                                            const TpmInfo& info, SymDef symmetric) {
  ProtectionConfig config;
  config.symmetric = symmetric;
  // 0. A tpmsec server: its anchor, its session; nothing of this process's.
  if (transport.spec().kind == TpmKind::kServe) {
    if (!std::holds_alternative<anchor::Automatic>(request.anchor)) {
      return usage_error(
          fmt::format("{} is a tpmsec server, which holds the trust anchor and puts its own session "
                      "on every command: give {} to `tpmsec serve`, not to its clients",
                      transport.describe(), anchor_name(request.anchor)));
    }
    if (request.salt) {
      return usage_error(
          fmt::format("{} is a tpmsec server, which chooses its session's salt: give salt= to "
                      "`tpmsec serve`, not to its clients",
                      transport.describe()));
    }
    return config;
  }
  const std::shared_ptr<HostState> host = host_state_of(request);
  const TpmId tpm = tpm_id_of(transport);
  config.unsalted = std::holds_alternative<anchor::Unsalted>(request.anchor);
  config.salt = request.salt;
  if (config.salt == SaltKind::kEcc && !info.ecc_p256) {
    return unsupported_error("this TPM does not support ECC P-256").with_reason(ErrorReason::kUnsupportedSalt);
  }
  const SaltKind kind = config.salt ? *config.salt : choose_salt(info);

  // 2. What `tpmsec provision` kept: a bind secret, else a pinned salt key.
  if (request.use_provisioned && std::holds_alternative<anchor::Automatic>(request.anchor) &&
      transport.outlives_process()) {
    TPMSEC_ASSIGN_OR_RETURN(std::optional<BindSecret> bind, host->bind_secret(tpm));
    if (bind) {
      config.bind = std::make_shared<const BindSecret>(std::move(*bind));
      return config;
    }
    TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> key, host->salt_key(tpm));
    if (key && (!config.salt || *config.salt == key->kind())) {
      config.salt = key->kind();
      config.salt_key = std::move(*key);
      return config;
    }
  }
  if (const auto* named = std::get_if<anchor::NullName>(&request.anchor)) {
    // 1. A pinned name.
    if (named->value.empty()) return usage_error("the null key's pinned name is empty");
    TPMSEC_ASSIGN_OR_RETURN(Bytes pinned, parse_null_name(named->value, *host));
    config.pinned_null_name = std::move(pinned);
    config.pin_origin = "--null-name " + named->value;
  } else if (std::string device = device_path_of(transport); !config.unsalted && !device.empty()) {
    // 3. The kernel pinned the null key at boot: the strongest anchor a
    // device has without an EK certificate, and it costs nothing to use.
    // (With EkCa it ties the certified EK to this machine's TPM.)
    if (std::string file = host->kernel_null_name_file(device); !file.empty()) {
      TPMSEC_ASSIGN_OR_RETURN(Bytes pinned, parse_null_name(file, *host));
      config.pinned_null_name = std::move(pinned);
      config.pin_origin = "the kernel's pin " + file;
    }
  }
  if (std::holds_alternative<anchor::Tofu>(request.anchor) && !config.pinned_null_name) {
    TPMSEC_RETURN_IF_ERROR(pin_first_use(host, tpm, kind, request.notice, config));
  }
  if (const auto* ek = std::get_if<anchor::EkCa>(&request.anchor)) {
    TPMSEC_ASSIGN_OR_RETURN(crypto::CaBundle bundle, load_ca_bundle(ek->bundle, *host));
    config.ek_ca = std::make_shared<const crypto::CaBundle>(std::move(bundle));
    TPMSEC_RETURN_IF_ERROR(pin_ek(host, tpm, request.notice, config));
  }
  if (config.unsalted) say(request.notice, "warning: unsalted session: no protection against a bus interposer");
  return config;
}

}  // namespace tpmsec
