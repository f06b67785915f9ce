#include "protected_server/status_front.h"

#include <pwd.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tpmsec-server/protected_server/status.h"
#include "tpmsec/command_table.h"
#include "tpmsec/frame_header.h"

namespace tpmsec::serve {
namespace {

using nlohmann::json;

// What the server's session is salted to, and what vouches for that key.
json anchor_json(const StatusSource& s) {
  json a = json::object();
  if (!s.factory) return a;
  const ProtectionConfig& c = s.factory->config();
  if (c.bind) {
    a["kind"] = "bind-secret";
  } else if (c.unsalted) {
    a["kind"] = "unsalted";
  } else if (c.salt_key) {
    a["kind"] = "salt-key";
    a["rests_on"] = fmt::format("persistent key 0x{:08x} pinned by tpmsec provision", c.salt_key->handle);
  } else if (c.ek_ca) {
    a["kind"] = "ek-ca";
    a["rests_on"] = "the EK certificate chaining to the CA bundle";
  } else if (c.pinned_null_name) {
    a["kind"] = "null-name";
    a["rests_on"] = c.pin_origin.empty() ? std::string("a pinned null key name") : c.pin_origin;
    a["name"] = to_hex(*c.pinned_null_name);
  } else if (c.trust_first_use) {
    a["kind"] = "tofu";
    a["rests_on"] = "the first null key seen";
  } else if (s.tpm && s.tpm->transport().in_process()) {
    a["kind"] = "in-process";
    a["rests_on"] = "no bus: the TPM is in this process";
  }
  return a;
}

json session_json(const StatusSource& s) {
  json j = json::object();
  if (!s.factory || !s.wrapper) return j;
  const SessionFactory& f = *s.factory;
  j["handle"] = fmt::format("0x{:08x}", s.wrapper->session_handle());
  j["started"] = s.wrapper->sessions_started();
  j["salted_to"] = f.salt_key()   ? "persistent key"
                   : f.ek_key()   ? "endorsement key"
                   : f.null_key() ? "null key"
                   : f.bound()    ? "bind secret (unsalted, bound)"
                                  : "nothing (unsalted)";
  j["parameter_encryption"] = "aes-128-cfb";
  j["strict"] = s.strict;
  return j;
}

json commands_json(const CommandWrapper& w) {
  json list = json::array();
  for (const auto& [code, c] : w.counts()) {
    const CommandInfo* info = find_command(code);
    list.push_back({{"name", info ? std::string(info->name) : "unknown"},
                    {"code", fmt::format("0x{:08x}", code)},
                    {"wrapped", c.wrapped},
                    {"encrypted", c.encrypted},
                    {"passed_in_clear", c.passed_through},
                    {"passed_because",
                     {{"takes_no_session", c.passed_no_session},
                      {"unknown_code", c.passed_unknown},
                      {"unreadable_frame", c.passed_unreadable},
                      {"no_slot_beside_the_callers", c.passed_no_slot},
                      {"own_handles_listed_by_the_server", c.passed_own_handles}}},
                    {"passwords_replaced", c.passwords_replaced},
                    {"passwords_left_in_clear", c.passwords_left},
                    {"refused_strict", c.refused}});
  }
  return list;
}

}  // namespace

std::string status_json(const StatusSource& s) {
  json j;
  j["pid"] = ::getpid();
  j["uptime_s"] =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - s.started).count();
  j["tpm"] = s.tpm ? s.tpm->transport().describe() : std::string();
  j["anchor"] = anchor_json(s);
  j["session"] = session_json(s);
  j["policy"] = s.policy;
  json clients = json::array();
  for (const auto& [id, who] : s.clients) clients.push_back(who);
  const server::ServerStats stats = s.server ? s.server->stats() : server::ServerStats{};
  j["clients"] = {{"connected", clients.size()}, {"list", clients}, {"dropped_for_stalling", stats.dropped}};
  j["totals"] = {{"client_commands", s.counts ? s.counts->commands : 0},
                 {"answered_with_a_resource_manager_error", s.counts ? s.counts->faults : 0},
                 {"refused_for_naming_anothers_handle", s.counts ? s.counts->refused : 0}};
  j["commands"] = s.wrapper ? commands_json(*s.wrapper) : json::array();
  return j.dump();
}

std::set<uint32_t> status_uids() {
  std::set<uint32_t> uids{0, static_cast<uint32_t>(::getuid())};
  passwd pw{}, *found = nullptr;
  char buf[1024];
  if (::getpwnam_r("tss", &pw, buf, sizeof(buf), &found) == 0 && found) uids.insert(found->pw_uid);
  return uids;
}

StatusFront::StatusFront(server::HandleSpace& space, std::unique_ptr<Transport> inner, StatusSource& source)
    : TransportDecorator(*inner, Traffic::kAlters), space_(space), inner_(std::move(inner)), source_(source) {
  source_.clients[space_.client()] = server::describe_peer(space_.client(), space_.peer());
}

StatusFront::~StatusFront() { source_.clients.erase(space_.client()); }

Result<Bytes> StatusFront::transmit(ByteView command) {
  if (!is_status_request(command)) return inner_->transmit(command);
  const std::optional<uint32_t>& uid = space_.peer().uid;
  if (!uid || !source_.allowed_uids.contains(*uid)) return error_frame(kResmgrNotPermitted);
  Result<Bytes> answer = status_response(status_json(source_));
  return answer.ok() ? std::move(*answer) : error_frame(kResmgrGeneralFailure);
}

}  // namespace tpmsec::serve
