// `tpmsec serve status`: asks the running server over its socket (the
// status request, tpmsec-server/protected_server/status.h) and prints its TPM, anchor,
// session, uptime, clients and per-command counts. The socket is reached as
// any serve: client reaches it, so who listens is checked first (root or
// tss, or the uid= given).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "serve_daemon.h"
#include "tpmsec-server/protected_server/status.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec::cli {
namespace {

using nlohmann::json;

struct StatusOptions {
  std::string tpm = "serve";
  bool json = false;
};

std::string duration(int64_t s) {
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{} min {} s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{} h {} min", s / 3600, (s % 3600) / 60);
  return fmt::format("{} d {} h", s / 86400, (s % 86400) / 3600);
}

std::string why_clear(const json& because) {
  std::string out;
  for (const auto& [why, n] : because.items()) {
    if (n.get<uint64_t>() == 0) continue;
    if (!out.empty()) out += ", ";
    std::string text = why;
    std::replace(text.begin(), text.end(), '_', ' ');
    out += fmt::format("{} {}", n.get<uint64_t>(), text);
  }
  return out;
}

void print_text(const json& j) {
  fmt::print("tpmsec serve, pid {}, up {}\n", j.value("pid", 0), duration(j.value("uptime_s", int64_t{0})));
  fmt::print("TPM:      {}\n", j.value("tpm", ""));
  const json& a = j["anchor"];
  fmt::print("anchor:   {}{}\n", a.value("kind", "none"),
             a.contains("rests_on") ? " (" + a.value("rests_on", "") + ")" : std::string());
  const json& s = j["session"];
  fmt::print("session:  {}, salted to {}, {} parameter encryption, {} started{}\n", s.value("handle", "none"),
             s.value("salted_to", "?"), s.value("parameter_encryption", "?"), s.value("started", 0),
             s.value("strict", false) ? ", strict" : "");
  fmt::print("policy:   {}\n", j.value("policy", ""));
  const json& c = j["clients"];
  fmt::print("clients:  {} connected, {} dropped for stalling\n", c.value("connected", 0),
             c.value("dropped_for_stalling", 0));
  for (const auto& who : c["list"]) fmt::print("  {}\n", who.get<std::string>());
  const json& t = j["totals"];
  fmt::print(
      "commands: {} from clients, {} answered with a resource-manager error, {} refused for naming another's "
      "handle\n",
      t.value("client_commands", 0), t.value("answered_with_a_resource_manager_error", 0),
      t.value("refused_for_naming_anothers_handle", 0));
  fmt::print("  {:<28} {:<10} {:>8} {:>9} {:>6}  {}\n", "command", "code", "wrapped", "encrypted", "clear",
             "why clear");
  for (const auto& k : j["commands"]) {
    fmt::print("  {:<28} {:<10} {:>8} {:>9} {:>6}  {}\n", k.value("name", ""), k.value("code", ""),
               k.value("wrapped", 0), k.value("encrypted", 0), k.value("passed_in_clear", 0),
               why_clear(k["passed_because"]));
  }
}

Status run_status(const StatusOptions& o) {
  TPMSEC_ASSIGN_OR_RETURN(TpmSpec spec, parse_transport_spec(o.tpm));
  if (spec.kind != TpmKind::kServe) return usage_error(fmt::format("--tpm {}: not a tpmsec server (serve:...)", o.tpm));
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> server, open_transport(spec));
  TPMSEC_ASSIGN_OR_RETURN(Bytes answer, server->transmit(serve::status_request()));
  Result<std::string> text = serve::read_status_response(answer);
  if (!text.ok()) return runtime_error(fmt::format("{}: {}", server->describe(), text.error().message()));
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return runtime_error(fmt::format("{}: the status is not JSON", server->describe()));
  if (o.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    print_text(j);
  }
  return ok_status();
}

}  // namespace

CLI::App* register_serve_status(CLI::App* serve, Action* action) {
  auto o = std::make_shared<StatusOptions>();
  CLI::App* sub = serve->add_subcommand(
      "status",
      "Ask the running server (over its socket) for its TPM, anchor, session, uptime, clients and per-command "
      "counts: wrapped, encrypted, passed in clear and why. Answered to root, tss and the server's own user");
  sub->add_option("--tpm", o->tpm, "The server: serve (/run/tpmsec/tpm.sock) or serve:path=SOCKET[,uid=N]")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print the server's answer as JSON (keys in docs/serve.md)");
  sub->callback([o, action] { *action = [o]() -> Status { return run_status(*o); }; });
  return sub;
}

}  // namespace tpmsec::cli
