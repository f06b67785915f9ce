#include "protection_options.h"

#include <fmt/format.h>

#include <map>

#include "tpmsec/bind_secret.h"
#include "tpmsec/ek_pin.h"
#include "tpmsec/kernel_pin.h"
#include "tpmsec/pin_store.h"
#include "tpmsec/salt_key.h"

namespace tpmsec::cli {
namespace {

const char* salt_label(SaltKind kind) { return kind == SaltKind::kRsa ? "rsa" : "ecc"; }

// The device path behind a TPM string, when it is a device: transport.
std::string device_path_of(const Transport& transport) {
  auto spec = parse_transport_spec(transport.describe());
  if (!spec.ok() || spec->scheme != "device") return "";
  return spec->path.empty() ? "/dev/tpm0" : spec->path;
}

// --ek-ca: the EKs pinned for this TPM string (ek_pin.h), and the hook that
// pins one on its first verified use and records a kernel-pin proof.
Status pin_ek(const Transport& transport, ProtectionConfig& config) {
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
  config.on_ek_verified = [store, tpm, boot, null_name, seen](const EkPin& ek) mutable -> Status {
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
      fmt::print(stderr, "tpmsec: pinned the EK {} for {} on its first verified use (in {})\n", to_hex(ek.name), tpm,
                 store.path(tpm, ek.kind));
    }
    return store.put(tpm, ek.kind, updated);
  };
  return ok_status();
}

}  // namespace

void ProtectionOptions::add_to(CLI::App* sub) {
  sub->add_option("--salt", salt,
                  "Salt the session to the null key with ecc (P-256 ECDH, as Linux), rsa (RSA-2048 OAEP), or auto "
                  "(ecc unless the TPM lacks P-256)")
      ->check(CLI::IsMember({"auto", "ecc", "rsa"}))
      ->capture_default_str();
  add_null_name_to(sub,
                   "Trust the salt key by its pinned name: 68 hex digits, or a file in the kernel's format such as "
                   "/sys/class/tpm/tpm0/null_name (read automatically for device: TPMs when present). A different "
                   "name is an integrity failure (exit 3)");
  sub->add_flag("--tofu", tofu,
                "Trust the null key seen at the first use of this boot and keep its name in the state directory "
                "($TPMSEC_STATE_DIR); later uses must match it. Weaker than --null-name: an interposer present at "
                "that first use wins. Forget it with 'tpmsec null-key --forget'");
  // The path is checked here (exit 2 when missing); its certificates when a
  // session is first salted.
  sub->add_option("--ek-ca", ek_ca,
                  "Salt sessions to the TPM's endorsement key, proven by its EK certificate (EK extended key usage, "
                  "not a CA) chaining to a root CA of this bundle (a PEM file or a directory of PEM files). The EK "
                  "is pinned for this TPM string on first use and, for device: TPMs, tied to the kernel's null_name "
                  "pin. A certificate that does not verify, an EK that is not the certified key, or another EK than "
                  "the pinned one is an integrity failure (exit 3); forget the pin with 'tpmsec null-key --forget'")
      ->check(CLI::ExistingPath)
      ->option_text("FILE|DIR");
  sub->add_flag("--unsalted", unsalted,
                "Unsalted session: authenticates, but gives NO protection against an interposer who saw the "
                "session start (for measurement only)");
}

void ProtectionOptions::add_null_name_to(CLI::App* sub, const char* help) {
  null_name_option = sub->add_option("--null-name", null_name, help);
}

bool ProtectionOptions::anchor_given() const {
  return (null_name_option && null_name_option->count() > 0) || tofu || !ek_ca.empty();
}

Result<ProtectionConfig> ProtectionOptions::config(const Transport& transport, const TpmInfo& info,
                                                   SymDef symmetric) const {
  ProtectionConfig config;
  config.symmetric = symmetric;
  config.unsalted = unsalted;
  if (salt == "ecc") config.salt = SaltKind::kEcc;
  if (salt == "rsa") config.salt = SaltKind::kRsa;
  if (config.salt == SaltKind::kEcc && !info.ecc_p256) {
    return unsupported_error("this TPM does not support ECC P-256: use --salt rsa");
  }
  SaltKind kind = config.salt ? *config.salt : choose_salt(info);
  bool named = null_name_option && null_name_option->count() > 0;
  if (named && null_name.empty()) {
    return usage_error("--null-name is empty: give the null key's name (68 hex digits) or a file holding it");
  }
  if (int(named) + int(tofu) + int(!ek_ca.empty()) > 1) {
    return usage_error("give one trust anchor: --ek-ca, --null-name or --tofu");
  }

  if (use_provisioned && !unsalted && !anchor_given() && transport.outlives_process()) {
    BindStore store(default_state_dir());
    TPMSEC_ASSIGN_OR_RETURN(std::optional<BindSecret> bind, store.get(transport.describe()));
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
  if (named) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes pinned, parse_null_name(null_name));
    config.pinned_null_name = std::move(pinned);
    config.pin_origin = "--null-name " + null_name;
  } else if (std::string device = device_path_of(transport); !unsalted && !device.empty()) {
    // The kernel pinned the null key at boot: the strongest anchor a device
    // has without an EK certificate, and it costs nothing to use.
    if (std::string file = kernel_null_name_file(device); !file.empty()) {
      TPMSEC_ASSIGN_OR_RETURN(Bytes pinned, parse_null_name(file));
      config.pinned_null_name = std::move(pinned);
      config.pin_origin = "the kernel's pin " + file;
    }
  }
  if (tofu && !config.pinned_null_name && !unsalted) {
    PinStore store(default_state_dir());
    std::string tpm = transport.describe();
    TPMSEC_ASSIGN_OR_RETURN(std::string boot, host_boot_id());
    TPMSEC_ASSIGN_OR_RETURN(std::optional<Bytes> pin, store.current(tpm, salt_label(kind), boot));
    if (pin) {
      config.pinned_null_name = std::move(*pin);
      config.pin_origin = fmt::format("--tofu ({}); if the TPM was reset on purpose, forget the pin with "
                                      "'tpmsec null-key --forget --tpm {}'",
                                      store.path(tpm, salt_label(kind)), tpm);
    } else {
      config.trust_first_use = true;
      // Every factory of this process (the policy's audited read, the
      // stream) sees the same first use: one pin, one warning, one name.
      auto seen = std::make_shared<std::optional<Bytes>>();
      config.on_first_use = [store, tpm, boot, kind, seen](const Bytes& name) mutable -> Status {
        if (*seen) {
          if (**seen == name) return ok_status();
          return integrity_error(fmt::format("null key name changed from {} to {} within one run (--tofu)",
                                             to_hex(**seen), to_hex(name)));
        }
        *seen = name;
        fmt::print(stderr,
                   "tpmsec: warning: --tofu: trusting the null key {} on first use for {} this boot; an "
                   "interposer present now would go unnoticed (pinned in {})\n",
                   to_hex(name), tpm, store.path(tpm, salt_label(kind)));
        return store.put(tpm, salt_label(kind), boot, name);
      };
    }
  }
  if (unsalted && !ek_ca.empty()) return usage_error("--ek-ca salts sessions to the EK: it cannot go with --unsalted");
  config.ek_ca = ek_ca;
  if (!ek_ca.empty()) TPMSEC_RETURN_IF_ERROR(pin_ek(transport, config));
  if (unsalted) fmt::print(stderr, "tpmsec: warning: unsalted session: no protection against a bus interposer\n");
  return config;
}

Result<std::unique_ptr<SessionFactory>> ProtectionOptions::factory(Tpm& tpm, const Transport& transport,
                                                                    const TpmInfo& info, SymDef symmetric) const {
  TPMSEC_ASSIGN_OR_RETURN(ProtectionConfig c, config(transport, info, symmetric));
  return SessionFactory::create(tpm, c, &info);
}

Status ProtectionOptions::verify_given_anchor(Tpm& tpm, const Transport& transport, const TpmInfo& info) const {
  if (!anchor_given()) return ok_status();
  return status_of(factory(tpm, transport, info, SymDef::aes128_cfb()));
}

}  // namespace tpmsec::cli
