// tpmsec provision: define a bind secret once, so protected commands start
// unsalted sessions bound to it (bind_secret.h); or pin a persistent salt key
// (salt_key.h), so they salt sessions to it without a null key.
#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"
#include "tpmsec/bind_secret.h"
#include "tpmsec/host/file_host_state.h"
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

// --salt-key: pin (or --create) a persistent salt key, or with --remove
// forget it (and evict it when tpmsec made it).
Status provision_salt_key(OpenTpm& open, ProtectRequest request, uint32_t handle, bool create, bool remove) {
  const TpmId id = TpmId::of(open.transport().describe());
  const std::string& tpm = id.text;
  FileHostState store;
  TPMSEC_ASSIGN_OR_RETURN(std::optional<PersistentSaltKey> kept, store.salt_key(id));
  if (remove) {
    if (!kept) return usage_error(fmt::format("no salt key is pinned for {}: nothing to remove", tpm));
    bool evicted = false;
    if (kept->created) {
      Status st = evict_salt_key(open.tpm(), *kept);
      if (!st.ok() && rc_base(st.error().tpm_rc()) != rc::kHandle) return st;
      evicted = st.ok();
    }
    TPMSEC_RETURN_IF_ERROR(status_of(store.erase(StateRecord::kSaltKey, id)));
    fmt::print(stderr, "tpmsec: forgot the salt key 0x{:08x} of {}{}\n", kept->handle, tpm,
               !kept->created ? " (left in the TPM: tpmsec did not make it)"
               : evicted      ? " and evicted it from the TPM"
                              : " (already gone from the TPM)");
    return ok_status();
  }
  if (kept) {
    return usage_error(fmt::format("{} already has a pinned salt key (0x{:08x}, {}); 'tpmsec provision --remove "
                                   "--salt-key' first",
                                   tpm, kept->handle, store.where(StateRecord::kSaltKey, id)));
  }
  if (std::holds_alternative<anchor::Unsalted>(request.anchor)) {
    return usage_error("--unsalted cannot vouch for a salt key");
  }
  TPMSEC_ASSIGN_OR_RETURN(auto protect, open.protect(std::move(request)));
  TPMSEC_ASSIGN_OR_RETURN(auto factory, protect->factory());
  const SaltKind kind = factory->config().salt.value_or(choose_salt(open.info()));
  TPMSEC_ASSIGN_OR_RETURN(PersistentSaltKey key,
                          create ? create_salt_key(*factory, handle, kind) : pin_salt_key(*factory, handle));
  if (Status st = store.put_salt_key(id, key); !st.ok()) {
    if (key.created) (void)evict_salt_key(open.tpm(), key);
    return st;
  }
  protect->keep(factory.get());
  fmt::print(stderr,
             "tpmsec: pinned the {} salt key at 0x{:08x} of {}{} (name {}, kept in {}); protected commands now salt "
             "their sessions to it, with no null key to load\n",
             key.kind() == SaltKind::kRsa ? "RSA" : "ECC", handle, tpm, key.created ? ", made by tpmsec" : "",
             to_hex(key.name), store.where(StateRecord::kSaltKey, id));
  return ok_status();
}

}  // namespace

void register_provision(CLI::App& app, Action* action) {
  struct Options {
    TpmOption tpm;
    ProtectionOptions protection;
    std::string nv_index = fmt::format("0x{:08x}", kDefaultBindIndex);
    std::string salt_key;
    bool create = false;
    bool remove = false;
    CLI::Option* salt_key_option = nullptr;
  };
  auto o = std::make_shared<Options>();
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
  sub->callback([o, action] {
    *action = [o]() -> Status {
      const bool salt_key = o->salt_key_option->count() > 0;
      if (o->protection.tofu) {
        // What is provisioned is kept for good: the first use of one boot
        // (whatever answered then, an interposer included) must not decide it.
        return usage_error(
            "provision does not take --tofu: what it keeps outlives this boot, so give an anchor: --null-name, "
            "--ek-ca, or on device: the kernel's pin (the embedded TPM needs none)");
      }
      if (o->create && !salt_key) return usage_error("--create goes with --salt-key");
      if (o->create && o->remove) return usage_error("give --create or --remove, not both");
      TPMSEC_ASSIGN_OR_RETURN(uint32_t index, parse_handle(o->nv_index, ht::kNvIndex, "--nv-index",
                                                           "an NV index handle", kDefaultBindIndex));
      uint32_t key_handle = kDefaultSaltKeyHandle;
      if (salt_key && !o->salt_key.empty()) {
        TPMSEC_ASSIGN_OR_RETURN(key_handle, parse_handle(o->salt_key, ht::kPersistent, "--salt-key",
                                                         "a persistent handle", kDefaultSaltKeyHandle));
      }
      TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o->protection.request());
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_tpm(o->tpm, /*keep=*/true));
      const std::string tpm = open.transport().describe();
      if (!open.transport().outlives_process()) {
        return usage_error(fmt::format("{} ends with this process: nothing to provision (use embedded:state=DIR)", tpm));
      }
      if (salt_key) return provision_salt_key(open, std::move(request), key_handle, o->create, o->remove);
      const TpmId id = TpmId::of(tpm);
      FileHostState store;
      TPMSEC_ASSIGN_OR_RETURN(std::optional<BindSecret> kept, store.bind_secret(id));
      if (o->remove) {
        if (!kept) return usage_error(fmt::format("{} is not provisioned: nothing to remove", tpm));
        Status undefined = undefine_bind_index(open.tpm(), kept->nv_index);
        if (!undefined.ok() && rc_base(undefined.error().tpm_rc()) != rc::kHandle) return undefined;
        TPMSEC_RETURN_IF_ERROR(status_of(store.erase(StateRecord::kBindSecret, id)));
        fmt::print(stderr, "tpmsec: removed the bind secret of {} (NV index 0x{:08x}{})\n", tpm, kept->nv_index,
                   undefined.ok() ? "" : ", already gone from the TPM");
        return ok_status();
      }
      if (kept) {
        return usage_error(fmt::format("{} is already provisioned (NV index 0x{:08x}, {}); 'tpmsec provision "
                                       "--remove' first",
                                       tpm, kept->nv_index, store.where(StateRecord::kBindSecret, id)));
      }
      if (o->protection.unsalted) {
        return usage_error("--unsalted would send the bind secret where an interposer can read it");
      }
      TPMSEC_ASSIGN_OR_RETURN(auto protect, open.protect(std::move(request)));
      TPMSEC_ASSIGN_OR_RETURN(auto factory, protect->factory());
      TPMSEC_ASSIGN_OR_RETURN(BindSecret secret, provision_bind_secret(*factory, index));
      if (Status st = store.put_bind_secret(id, secret); !st.ok()) {
        (void)undefine_bind_index(open.tpm(), index);
        return st;
      }
      protect->keep(factory.get());
      fmt::print(stderr,
                 "tpmsec: provisioned {}: NV index 0x{:08x} holds a bind secret kept in {} (readable only by its "
                 "owner); protected commands now start unsalted sessions bound to it\n",
                 tpm, index, store.where(StateRecord::kBindSecret, id));
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
