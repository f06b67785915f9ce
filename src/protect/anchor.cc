// Anchor resolution (protect.h): the one place that turns what a front end
// asked for into the ProtectionConfig sessions are started with, in the
// order protect.h documents.
#include <fmt/format.h>

#include <map>

#include "notice.h"
#include "tpmsec/bind_secret.h"
#include "tpmsec/ek_pin.h"
#include "tpmsec/kernel_pin.h"
#include "tpmsec/pin_store.h"
#include "tpmsec/protect.h"
#include "tpmsec/salt_key.h"

namespace tpmsec {
namespace {

const char* salt_label(SaltKind kind) { return kind == SaltKind::kRsa ? "rsa" : "ecc"; }

// The device path behind a TPM string, when it is a device: transport.
std::string device_path_of(const Transport& transport) {
  auto spec = parse_transport_spec(transport.describe());
  if (!spec.ok() || spec->scheme != "device") return "";
  return spec->path.empty() ? "/dev/tpm0" : spec->path;
}

// EkCa: the EKs pinned for this TPM string (ek_pin.h), and the hook that
// pins one on its first verified use and records a kernel-pin proof.
Status pin_ek(const Transport& transport, const Notice& notice, ProtectionConfig& config) {
  EkPinStore store(default_state_dir());
  std::string tpm = transport.describe();
  // The boot matters only to a kernel pin's proof (device: TPMs).
  std::string boot;
  if (config.pinned_null_name) {
    TPMSEC_ASSIGN_OR_RETURN(boot, host_boot_id());
  }
  for (SaltKind kind : {SaltKind::kEcc, SaltKind::kRsa}) {
    TPMSEC_ASSIGN_OR_RETURN(std::optional<EkPinStore::Record> record, store.get(tpm, kind));
    if (!record) continue;
    bool proven = config.pinned_null_name && record->null_boot == boot && record->null_name == *config.pinned_null_name;
    config.ek_pins.push_back(EkPin{kind, record->name, proven});
  }
  config.ek_pin_origin = fmt::format("if this TPM was replaced on purpose, forget its EK pin ({}) with 'tpmsec null-key "
                                     "--forget --tpm {}'",
                                     store.dir(), tpm);
  // Every factory of this process sees the same EK: one pin, one name.
  auto seen = std::make_shared<std::map<SaltKind, Bytes>>();
  std::optional<Bytes> null_name = config.pinned_null_name;
  config.on_ek_verified = [store, tpm, boot, null_name, seen, notice](const EkPin& ek) mutable -> Status {
    auto [at, first] = seen->emplace(ek.kind, ek.name);
    if (!first && at->second != ek.name) {
      return integrity_error(fmt::format("the EK changed from {} to {} within one run", to_hex(at->second),
                                         to_hex(ek.name)));
    }
    TPMSEC_ASSIGN_OR_RETURN(std::optional<EkPinStore::Record> record, store.get(tpm, ek.kind));
    if (record && record->name != ek.name) {
      return integrity_error(fmt::format("the EK pinned for {} in {} is {}, not {}", tpm, store.path(tpm, ek.kind),
                                         to_hex(record->name), to_hex(ek.name)));
    }
    EkPinStore::Record updated = record ? *record : EkPinStore::Record{ek.name, "", {}};
    if (ek.null_key_proven && null_name) {
      updated.null_boot = boot;
      updated.null_name = *null_name;
    }
    if (!record) {
      say(notice, fmt::format("pinned the EK {} for {} on its first verified use (in {})", to_hex(ek.name), tpm,
                              store.path(tpm, ek.kind)));
    }
    return store.put(tpm, ek.kind, updated);
  };
  return ok_status();
}

// Tofu: the pin kept this boot, else trust on this first use and keep it.
Status pin_first_use(const Transport& transport, SaltKind kind, const Notice& notice, ProtectionConfig& config) {
  PinStore store(default_state_dir());
  std::string tpm = transport.describe();
  TPMSEC_ASSIGN_OR_RETURN(std::string boot, host_boot_id());
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Bytes> pin, store.current(tpm, salt_label(kind), boot));
  if (pin) {
    config.pinned_null_name = std::move(*pin);
    config.pin_origin = fmt::format("--tofu ({}); if the TPM was reset on purpose, forget the pin with "
                                    "'tpmsec null-key --forget --tpm {}'",
                                    store.path(tpm, salt_label(kind)), tpm);
    return ok_status();
  }
  config.trust_first_use = true;
  // Every factory of this process (the policy's audited read, the stream)
  // sees the same first use: one pin, one warning, one name.
  auto seen = std::make_shared<std::optional<Bytes>>();
  config.on_first_use = [store, tpm, boot, kind, seen, notice](const Bytes& name) mutable -> Status {
    if (*seen) {
      if (**seen == name) return ok_status();
      return integrity_error(fmt::format("null key name changed from {} to {} within one run (--tofu)",
                                         to_hex(**seen), to_hex(name)));
    }
    *seen = name;
    say(notice, fmt::format("warning: --tofu: trusting the null key {} on first use for {} this boot; an "
                            "interposer present now would go unnoticed (pinned in {})",
                            to_hex(name), tpm, store.path(tpm, salt_label(kind))));
    return store.put(tpm, salt_label(kind), boot, name);
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

Result<ProtectionConfig> resolve_protection(const ProtectRequest& request, const Transport& transport,
                                            const TpmInfo& info, SymDef symmetric) {
  ProtectionConfig config;
  config.symmetric = symmetric;
  config.unsalted = std::holds_alternative<anchor::Unsalted>(request.anchor);
  config.salt = request.salt;
  if (config.salt == SaltKind::kEcc && !info.ecc_p256) {
    return unsupported_error("this TPM does not support ECC P-256").with_reason(ErrorReason::kUnsupportedSalt);
  }
  const SaltKind kind = config.salt ? *config.salt : choose_salt(info);

  // 2. What `tpmsec provision` kept: a bind secret, else a pinned salt key.
  if (request.use_provisioned && std::holds_alternative<anchor::Automatic>(request.anchor) &&
      transport.outlives_process()) {
    TPMSEC_ASSIGN_OR_RETURN(std::optional<BindSecret> bind, BindStore(default_state_dir()).get(transport.describe()));
    if (bind) {
      config.bind = std::make_shared<const BindSecret>(std::move(*bind));
      return config;
    }
    TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> key,
                            SaltKeyStore(default_state_dir()).get(transport.describe()));
    if (key && (!config.salt || *config.salt == key->kind())) {
      config.salt = key->kind();
      config.salt_key = std::move(*key);
      return config;
    }
  }
  if (const auto* named = std::get_if<anchor::NullName>(&request.anchor)) {
    // 1. A pinned name.
    if (named->value.empty()) return usage_error("the null key's pinned name is empty");
    TPMSEC_ASSIGN_OR_RETURN(Bytes pinned, parse_null_name(named->value));
    config.pinned_null_name = std::move(pinned);
    config.pin_origin = "--null-name " + named->value;
  } else if (std::string device = device_path_of(transport); !config.unsalted && !device.empty()) {
    // 3. The kernel pinned the null key at boot: the strongest anchor a
    // device has without an EK certificate, and it costs nothing to use.
    // (With EkCa it ties the certified EK to this machine's TPM.)
    if (std::string file = kernel_null_name_file(device); !file.empty()) {
      TPMSEC_ASSIGN_OR_RETURN(Bytes pinned, parse_null_name(file));
      config.pinned_null_name = std::move(pinned);
      config.pin_origin = "the kernel's pin " + file;
    }
  }
  if (std::holds_alternative<anchor::Tofu>(request.anchor) && !config.pinned_null_name) {
    TPMSEC_RETURN_IF_ERROR(pin_first_use(transport, kind, request.notice, config));
  }
  if (const auto* ek = std::get_if<anchor::EkCa>(&request.anchor)) {
    config.ek_ca = ek->bundle;
    TPMSEC_RETURN_IF_ERROR(pin_ek(transport, request.notice, config));
  }
  if (config.unsalted) say(request.notice, "warning: unsalted session: no protection against a bus interposer");
  return config;
}

}  // namespace tpmsec
