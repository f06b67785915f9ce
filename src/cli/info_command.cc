// tpmsec info: identity and capabilities.
#include <fmt/format.h>

#include "cli.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec::cli {

void register_info(CLI::App& app, Action* action) {
  struct Options {
    TpmOption tpm;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("info", "Show the TPM's identity and capabilities (as the seed thread quotes them)");
  opts->tpm.add_to(sub);
  sub->add_flag("--json", opts->json, "Print JSON (keys documented in docs/info-json.md)");
  sub->callback([opts, action] {
    *action = [opts]() -> Status {
      TPMSEC_ASSIGN_OR_RETURN(OpenTpm open, open_tpm(opts->tpm));
      TPMSEC_ASSIGN_OR_RETURN(TpmInfo info, read_tpm_info(*open.tpm));
      if (opts->json) {
        nlohmann::json j = to_json(info);
        j["transport"] = open.transport->describe();
        fmt::print("{}\n", j.dump(2));
      } else {
        fmt::print("{:<24}{}\n{}", "transport", open.transport->describe(), to_text(info));
      }
      return ok_status();
    };
  });
}

}  // namespace tpmsec::cli
