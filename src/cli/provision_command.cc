// tpmsec provision: define a bind secret once, so protected commands start
// unsalted sessions bound to it (bind_secret.h); or pin a persistent salt key
// (salt_key.h), so they salt sessions to it without a null key.
#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"
#include "tpmsec/bind_secret.h"
#include "tpmsec/provision.h"
#include "tpmsec/response_code.h"
#include "tpmsec/salt_key.h"

namespace tpmsec::cli {
namespace {

// A handle of type `type` given as 8 hex digits (0x optional).
Result<uint32_t> parse_handle(const std::string& text, uint8_t type, const char* option, const char* what,
                              uint32_t example) {
  std::string hex = text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0 ? text.substr(2) : text;
  auto bytes = hex.size() == 8 ? from_hex(hex) : Result<Bytes>(usage_error("bad length"));
  if (!bytes.ok() || (*bytes)[0] != type) {
    return usage_error(fmt::format("{} must be {} such as 0x{:08x}, got '{}'", option, what, example, text));
  }
  return load_be32(bytes->data());
}

struct ProvisionOptions {
  TpmOption tpm;
  ProtectionOptions protection;
  std::string nv_index = fmt::format("0x{:08x}", kDefaultBindIndex);
  std::string salt_key;
  bool create = false;
  bool remove = false;
  CLI::Option* salt_key_option = nullptr;
};

// --salt-key: pin (or --create) a persistent salt key, or with --remove
// forget it (and evict it when tpmsec made it).
Status run_salt_key(ProtectedTpm& tpm, uint32_t handle, bool create, bool remove) {
  if (remove) {
    TPMSEC_ASSIGN_OR_RETURN(RemovedSaltKey r, unprovision_salt_key(tpm));
    fmt::print(stderr, "tpmsec: forgot the salt key 0x{:08x} of {}{}\n", r.key.handle, r.tpm,
               !r.key.created ? " (left in the TPM: tpmsec did not make it)"
               : r.evicted    ? " and evicted it from the TPM"
                              : " (already gone from the TPM)");
    return ok_status();
  }
  TPMSEC_ASSIGN_OR_RETURN(PinnedSaltKey p, provision_salt_key(tpm, handle, create));
  fmt::print(stderr,
             "tpmsec: pinned the {} salt key at 0x{:08x} of {}{} (name {}, kept in {}); protected commands now salt "
             "their sessions to it, with no null key to load\n",
             p.key.kind() == SaltKind::kRsa ? "RSA" : "ECC", handle, p.where.tpm,
             p.key.created ? ", made by tpmsec" : "", to_hex(p.key.name), p.where.kept_in);
  return ok_status();
}

// A bind secret at `index`, or with --remove its removal.
Status run_bind_secret(ProtectedTpm& tpm, uint32_t index, bool remove) {
  if (remove) {
    TPMSEC_ASSIGN_OR_RETURN(RemovedBindSecret r, unprovision_bind(tpm));
    fmt::print(stderr, "tpmsec: removed the bind secret of {} (NV index 0x{:08x}{})\n", r.tpm, r.nv_index,
               r.index_was_gone ? ", already gone from the TPM" : "");
    return ok_status();
  }
  TPMSEC_ASSIGN_OR_RETURN(Provisioned p, provision_bind(tpm, index));
  fmt::print(stderr,
             "tpmsec: provisioned {}: NV index 0x{:08x} holds a bind secret kept in {} (readable only by its "
             "owner); protected commands now start unsalted sessions bound to it\n",
             p.tpm, index, p.kept_in);
  return ok_status();
}

Status run_provision(const ProvisionOptions& o) {
  const bool salt_key = o.salt_key_option->count() > 0;
  if (o.protection.tofu) {
    // What is provisioned is kept for good: the first use of one boot
    // (whatever answered then, an interposer included) must not decide it.
    return usage_error(
        "provision does not take --tofu: what it keeps outlives this boot, so give an anchor: --null-name, "
        "--ek-ca, or on device: the kernel's pin (the embedded TPM needs none)");
  }
  if (o.protection.unsalted && !o.remove) {
    return usage_error(salt_key ? "--unsalted cannot vouch for a salt key"
                                : "--unsalted would send the bind secret where an interposer can read it");
  }
  if (o.create && !salt_key) return usage_error("--create goes with --salt-key");
  if (o.create && o.remove) return usage_error("give --create or --remove, not both");
  TPMSEC_ASSIGN_OR_RETURN(
      uint32_t index, parse_handle(o.nv_index, ht::kNvIndex, "--nv-index", "an NV index handle", kDefaultBindIndex));
  uint32_t key_handle = kDefaultSaltKeyHandle;
  if (salt_key && !o.salt_key.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(key_handle, parse_handle(o.salt_key, ht::kPersistent, "--salt-key", "a persistent handle",
                                                     kDefaultSaltKeyHandle));
  }
  TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o.protection.request());
  request.keep = true;
  TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_protected(o.tpm, std::move(request)));
  if (salt_key) return run_salt_key(*open.protect, key_handle, o.create, o.remove);
  return run_bind_secret(*open.protect, index, o.remove);
}

}  // namespace

void register_provision(CLI::App& app, Action* action) {
  auto o = std::make_shared<ProvisionOptions>();
  o->protection.use_provisioned = false;
  CLI::App* sub = app.add_subcommand(
      "provision",
      "Define a bind secret in the TPM once (an NV index whose authValue only this host knows, kept in the state "
      "directory): protected commands then start sessions bound to it, without a salt; or, with --salt-key, pin a "
      "persistent salt key. The session that carries it is salted to an anchor: --null-name, --ek-ca, or on "
      "device: the kernel's pin (the embedded TPM needs none); --tofu is refused, since what is kept outlives the "
      "boot whose first use it would trust (docs/threat-model.md)");
  o->tpm.add_to(sub, /*state_changing=*/true);
  o->protection.add_to(sub, o->tpm);
  sub->add_option("--nv-index", o->nv_index, "The NV index to define (owner range)")->capture_default_str();
  o->salt_key_option =
      sub->add_option("--salt-key", o->salt_key,
                      fmt::format("Instead of a bind secret, pin the persistent key at HANDLE (default 0x{:08x}, "
                                  "where systemd keeps its SRK) as the salt key: its public area is read in an "
                                  "audited session salted to the anchor you give, and protected commands then salt "
                                  "their sessions to it (StartAuthSession and the command, nothing else)",
                                  kDefaultSaltKeyHandle))
          ->expected(0, 1)
          ->option_text("[HANDLE]");
  sub->add_flag("--create", o->create,
                "With --salt-key: first make the key (CreatePrimary in the owner hierarchy with the SRK template, "
                "EvictControl to HANDLE); --remove then evicts it again");
  sub->add_flag("--remove", o->remove,
                "Undefine the index and delete the kept secret; with --salt-key, forget the pinned key (and evict "
                "it if tpmsec made it)");
  sub->callback([o, action] { *action = [o]() -> Status { return run_provision(*o); }; });
}

}  // namespace tpmsec::cli
