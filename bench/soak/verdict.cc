#include "soak/verdict.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpmsec/response_code.h"

namespace tpmsec::soak {
namespace {

using json = nlohmann::json;
using ull = unsigned long long;

// The handles of a sample other than serve's own session.
size_t beyond(const TpmHandles& h, uint32_t own_session) {
  size_t n = h.transient.size();
  for (const auto* list : {&h.loaded_sessions, &h.saved_sessions}) {
    n += std::count_if(list->begin(), list->end(), [&](uint32_t x) { return x != own_session; });
  }
  return n;
}

std::string handles_text(const Sample& s, uint32_t own) {
  if (!s.handles_read) return "(the TPM did not answer)";
  char b[160];
  std::snprintf(b, sizeof(b),
                "%zu (transient %zu, loaded sessions %zu, saved sessions %zu; serve's own session not counted)",
                beyond(s.handles, own), s.handles.transient.size(), s.handles.loaded_sessions.size(),
                s.handles.saved_sessions.size());
  return b;
}

void print_counts(const Tally& t, const json& totals) {
  std::printf("  %-38s %llu\n", "commands sent", static_cast<ull>(t.sent));
  std::printf("  %-38s %llu\n", "answered", static_cast<ull>(t.answered));
  std::printf("  %-38s %llu\n", "unanswered", static_cast<ull>(t.unanswered));
  std::printf("  %-38s %llu\n", "connections refused", static_cast<ull>(t.refused));
  std::printf("  %-38s %llu (%llu SIGKILLed in flight)\n", "clients", static_cast<ull>(t.clients),
              static_cast<ull>(t.killed));
  for (const auto& [name, n] : t.scripts) std::printf("    %-36s %llu\n", name.c_str(), static_cast<ull>(n));
  std::printf("  %-38s %llu (%llu failed", "tpm2-tools runs over D-Bus", static_cast<ull>(t.tool_runs),
              static_cast<ull>(t.tool_failures));
  for (const auto& [code, n] : t.tool_exits) std::printf("; exit %d: %llu", code, static_cast<ull>(n));
  std::printf(")\n  %-38s %llu\n", "errors (response codes)", static_cast<ull>([&] {
                uint64_t n = 0;
                for (const auto& [rc, c] : t.errors) n += c;
                return n;
              }()));
  for (const auto& [rc, n] : t.errors) {
    std::printf("    0x%-8x %-25s %llu\n", rc, describe_rc(rc).substr(0, 60).c_str(), static_cast<ull>(n));
  }
  std::printf("  %-38s %llu (%llu failed), %llu\n", "TPM resets, stalls", static_cast<ull>(t.resets),
              static_cast<ull>(t.resets_failed), static_cast<ull>(t.stalls));
  std::printf("  %-38s %s\n", "serve's totals (serve status)", totals.dump().c_str());
}

}  // namespace

bool verdict(Rig& rig, const Driver& driver, const SoakOptions& o, long max_growth_kib) {
  json status = json::parse(rig.status(), nullptr, false);
  uint32_t own = 0;
  if (status.is_object() && status["session"].contains("handle")) {
    own = static_cast<uint32_t>(std::stoul(status["session"]["handle"].get<std::string>(), nullptr, 16));
  }
  const json totals = status.is_object() ? status["totals"] : json();
  const int serve_exit = rig.stop_serve();
  Sample after;
  if (auto h = rig.tpm_handles()) after.handles = *h, after.handles_read = true;
  const Tally& t = driver.tally();
  const Sample &w = driver.warm(), &e = driver.end();
  const long growth = e.rss_kib - w.rss_kib;
  std::printf("soak: tpmsec serve, clients of uids 0, 1, 65534 over its socket and D-Bus, %d at once\n", o.clients);
  print_counts(t, totals);
  std::printf("  %-38s %ld KiB / %ld KiB / %+ld KiB\n", "serve RSS warm-up / end / growth", w.rss_kib, e.rss_kib,
              growth);
  std::printf("  %-38s %ld / %ld\n", "serve open fds warm-up / end", w.fds, e.fds);
  std::printf("  %-38s %s\n", "TPM handles after the warm-up", handles_text(w, own).c_str());
  std::printf("  %-38s %s\n", "TPM handles at the end", handles_text(e, own).c_str());
  std::printf("  %-38s %s\n", "TPM handles after serve stopped", handles_text(after, 0).c_str());
  std::printf("  %-38s %d\n", "serve's exit code", serve_exit);
  std::printf("  %-38s %.0f s (%.0f commands/s)\n", "wall time", driver.seconds(),
              t.sent / std::max(driver.seconds(), 1e-3));
  std::vector<std::string> failed;
  if (growth > max_growth_kib)
    failed.push_back("serve's RSS grew by " + std::to_string(growth) + " KiB after the warm-up");
  if (e.fds != w.fds)
    failed.push_back("serve's open descriptors went from " + std::to_string(w.fds) + " to " + std::to_string(e.fds));
  if (!e.handles_read || beyond(e.handles, own) != 0) failed.push_back("handles left in the TPM at the end");
  if (!after.handles_read || after.handles.total() != 0)
    failed.push_back("handles left in the TPM after serve stopped");
  if (!w.quiet || !e.quiet) failed.push_back("serve still counted a closed client after 60 s");
  if (t.unanswered || t.refused) failed.push_back("clients unanswered or refused");
  if (t.sent < o.commands / 2) failed.push_back("fewer than half the commands were sent");
  if (t.resets_failed) failed.push_back("a TPM reset failed");
  if (serve_exit != 0) failed.push_back("serve exited with " + std::to_string(serve_exit));
  for (const auto& f : failed) std::fprintf(stderr, "soak: FAILED: %s\n", f.c_str());
  std::printf("soak: %s\n", failed.empty() ? "passed" : "FAILED");
  return failed.empty();
}

}  // namespace tpmsec::soak
