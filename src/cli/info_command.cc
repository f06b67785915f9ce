// tpmsec info: identity and capabilities.
#include <fmt/format.h>

#include "cli.h"
#include "tpmsec/provision.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec::cli {

void register_info(CLI::App& app, Action* action) {
  struct Options {
    TpmOption tpm;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("info", "Show the TPM's identity and capabilities (as the seed thread quotes them)");
  opts->tpm.add_to(sub);
  sub->add_flag("--json", opts->json, "Print JSON (keys documented in docs/info-json.md)");
  sub->callback([opts, action] {
    *action = [opts]() -> Status {
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_tpm(opts->tpm));
      const MeasuredTpm& m = *open.measured;
      if (opts->json) {
        nlohmann::json j = m.identity;
        if (!m.emulated) j.erase("emulated");  // a real TPM's JSON is as docs/info-json.md shows it
        j["transport"] = open.transport().describe();
        fmt::print("{}\n", j.dump(2));
      } else {
        std::string text = m.emulated ? to_text(*m.emulated) : to_text(m.info);
        fmt::print("{:<24}{}\n{}", "transport", open.transport().describe(), text);
        // What `tpmsec provision` kept for protected commands here.
        if (open.transport().outlives_process()) {
          const ProvisionStatus kept = provision_status(tpm_id_of(open.transport()));
          const auto& bind = kept.bind_secret;
          fmt::print("{:<24}{}\n", "bind secret",
                     !bind.ok() ? bind.error().message()
                     : *bind
                         ? fmt::format("provisioned: NV index 0x{:08x} ({})", (*bind)->nv_index, kept.bind_secret_file)
                         : std::string("not provisioned (tpmsec provision)"));
          const auto& key = kept.salt_key;
          fmt::print("{:<24}{}\n", "salt key",
                     !key.ok() ? key.error().message()
                     : *key    ? fmt::format("pinned: 0x{:08x}, {}{} ({})", (*key)->handle,
                                          (*key)->kind() == SaltKind::kRsa ? "RSA" : "ECC",
                                          (*key)->created ? ", made by tpmsec" : "", kept.salt_key_file)
                               : std::string("none pinned (tpmsec provision --salt-key)"));
        }
      }
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
