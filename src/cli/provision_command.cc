// tpmsec provision: define a bind secret once, so protected commands start
// unsalted sessions bound to it (bind_secret.h).
#include <fmt/format.h>

#include "cli.h"
#include "protection_options.h"
#include "tpmsec/bind_secret.h"
#include "tpmsec/pin_store.h"
#include "tpmsec/response_code.h"

namespace tpmsec::cli {
namespace {

Result<uint32_t> parse_nv_index(const std::string& text) {
  std::string hex = text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0 ? text.substr(2) : text;
  auto bytes = hex.size() == 8 ? from_hex(hex) : Result<Bytes>(usage_error("bad length"));
  if (!bytes.ok() || (*bytes)[0] != ht::kNvIndex) {
    return usage_error(fmt::format("--nv-index must be an NV index handle such as 0x{:08x}, got '{}'",
                                   kDefaultBindIndex, text));
  }
  return load_be32(bytes->data());
}

}  // namespace

void register_provision(CLI::App& app, Action* action) {
  struct Options {
    TpmOption tpm;
    ProtectionOptions protection;
    std::string nv_index = fmt::format("0x{:08x}", kDefaultBindIndex);
    bool remove = false;
  };
  auto o = std::make_shared<Options>();
  o->protection.use_bind = false;
  CLI::App* sub = app.add_subcommand(
      "provision",
      "Define a bind secret in the TPM once (an NV index whose authValue only this host knows, kept in the state "
      "directory): protected commands then start sessions bound to it, without a salt (docs/threat-model.md)");
  o->tpm.add_to(sub);
  o->protection.add_to(sub);
  sub->add_option("--nv-index", o->nv_index, "The NV index to define (owner range)")->capture_default_str();
  sub->add_flag("--remove", o->remove, "Undefine the index and delete the kept secret");
  sub->callback([o, action] {
    *action = [o]() -> Status {
      TPMSEC_ASSIGN_OR_RETURN(uint32_t index, parse_nv_index(o->nv_index));
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_tpm(o->tpm, /*keep=*/true));
      const std::string tpm = open.transport().describe();
      if (!open.transport().outlives_process()) {
        return usage_error(fmt::format("{} ends with this process: nothing to provision (use embedded:state=DIR)", tpm));
      }
      BindStore store(default_state_dir());
      TPMSEC_ASSIGN_OR_RETURN(std::optional<BindSecret> kept, store.get(tpm));
      if (o->remove) {
        if (!kept) return usage_error(fmt::format("{} is not provisioned: nothing to remove", tpm));
        Status undefined = undefine_bind_index(open.tpm(), kept->nv_index);
        if (!undefined.ok() && rc_base(undefined.error().tpm_rc()) != rc::kHandle) return undefined;
        TPMSEC_RETURN_IF_ERROR(status_of(store.remove(tpm)));
        fmt::print(stderr, "tpmsec: removed the bind secret of {} (NV index 0x{:08x}{})\n", tpm, kept->nv_index,
                   undefined.ok() ? "" : ", already gone from the TPM");
        return ok_status();
      }
      if (kept) {
        return usage_error(fmt::format("{} is already provisioned (NV index 0x{:08x}, {}); 'tpmsec provision "
                                       "--remove' first",
                                       tpm, kept->nv_index, store.path(tpm)));
      }
      if (o->protection.unsalted) {
        return usage_error("--unsalted would send the bind secret where an interposer can read it");
      }
      TPMSEC_ASSIGN_OR_RETURN(auto factory, o->protection.factory(open.tpm(), open.transport(), open.info(),
                                                                  SymDef::aes128_cfb()));
      TPMSEC_ASSIGN_OR_RETURN(BindSecret secret, provision_bind_secret(*factory, index));
      if (Status st = store.put(tpm, secret); !st.ok()) {
        (void)undefine_bind_index(open.tpm(), index);
        return st;
      }
      open.keep(factory.get());
      fmt::print(stderr,
                 "tpmsec: provisioned {}: NV index 0x{:08x} holds a bind secret kept in {} (readable only by its "
                 "owner); protected commands now start unsalted sessions bound to it\n",
                 tpm, index, store.path(tpm));
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
