// tpmsec profiles: the latency profiles --emulate can use, how much of each
// is measured, and what each implies per protected PCR extend.
#include <fmt/format.h>

#include <cmath>

#include "cli.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/emulation/profile_summary.h"
#include "tpmsec/emulation/value_range.h"

namespace tpmsec::cli {

void register_profiles(CLI::App& app, Action* action);

namespace {

std::string percent(size_t part, size_t whole) {
  return whole ? fmt::format("{:.0f}%", 100.0 * double(part) / double(whole)) : "-";
}

// Milliseconds for JSON output: three decimals (microseconds) are all a model carries.
double ms3(double ms) { return std::round(ms * 1000.0) / 1000.0; }

nlohmann::json summary_json(const LatencyProfile& p) {
  ProfileSummary s = summarize(p);
  ExtendFigures f = extend_figures(p);
  ExtendFigures lo = extend_figures(profile_at(p, RangeEnd::kLow)), hi = extend_figures(profile_at(p, RangeEnd::kHigh));
  return {{"id", p.id},
          {"name", p.name},
          {"bus", p.identity.bus},
          {"path", profile_path(p.id)},
          {"values", s.values},
          {"tags", {{"M", s.measured}, {"D", s.derived}, {"P", s.proxy}, {"E", s.estimate}, {"B", s.bound}}},
          {"measured_or_derived_percent", std::round(1000.0 * s.measured_fraction()) / 10.0},
          {"estimates_only", s.estimates_only()},
          {"extend_ms",
           {{"plain", ms3(f.plain_ms)},
            {"hmac", ms3(f.hmac_ms)},
            {"per_command", ms3(f.per_command_ms)},
            {"saved_context", ms3(f.saved_context_ms)}}},
          // Each figure's range: the same sums at the low and high ends of every value's range.
          {"extend_ms_range",
           {{"plain", {ms3(lo.plain_ms), ms3(hi.plain_ms)}},
            {"hmac", {ms3(lo.hmac_ms), ms3(hi.hmac_ms)}},
            {"per_command", {ms3(lo.per_command_ms), ms3(hi.per_command_ms)}},
            {"saved_context", {ms3(lo.saved_context_ms), ms3(hi.saved_context_ms)}}}}};
}

constexpr const char* kColumns =
    "M/D: share of values measured or derived from a measured loop; P/E/B: proxy, estimate, bound\n"
    "(docs/latency-profiles.md). Per protected PCR extend (docs/strategies.md), in ms, from the means:\n"
    "  plain      PCR_Extend with password auth\n"
    "  HMAC'd     PCR_Extend + HMAC session (resident session, steady state)\n"
    "  per-cmd    ContextLoad(null key) + ECC-salted StartAuthSession + FlushContext + HMAC'd (Linux 6.10)\n"
    "  saved-ctx  ContextLoad(session) + HMAC'd + ContextSave(session) (the seed thread's proposal)\n";

Status list_profiles(bool json, bool names) {
  TPMSEC_ASSIGN_OR_RETURN(std::vector<LatencyProfile> all, load_all_profiles());
  if (names) {
    for (const LatencyProfile& p : all) fmt::print("{}\n", p.id);
    return ok_status();
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const LatencyProfile& p : all) out.push_back(summary_json(p));
    fmt::print("{}\n", out.dump(2));
    return ok_status();
  }
  fmt::print("{:<14} {:<32} {:<24} {:>6} {:>5} {:>6} {:>8} {:>8} {:>8} {:>9}\n", "PROFILE", "NAME", "BUS", "VALUES",
             "M/D", "P/E/B", "PLAIN", "HMAC'D", "PER-CMD", "SAVED-CTX");
  for (const LatencyProfile& p : all) {
    ProfileSummary s = summarize(p);
    ExtendFigures f = extend_figures(p);
    fmt::print("{:<14} {:<32} {:<24} {:>6} {:>5} {:>6} {:>8.2f} {:>8.2f} {:>8.2f} {:>9.2f}{}\n", p.id, p.name,
               p.identity.bus, s.values, percent(s.measured_or_derived(), s.values),
               percent(s.values - s.measured_or_derived(), s.values), f.plain_ms, f.hmac_ms, f.per_command_ms,
               f.saved_context_ms, s.estimates_only() ? "  (estimates only)" : "");
  }
  fmt::print("\n{}Details: tpmsec profiles show NAME\n", kColumns);
  return ok_status();
}

void print_value(std::string_view label, const LatencyValue& v, std::string_view unit = "", int decimals = 3) {
  fmt::print("{:<27} {:>9.{}f}{:<5} {:>8.{}f}  {}  {:<9} {}\n", label, v.ms, decimals, unit, v.jitter_ms, decimals,
             v.tag, tag_name(v.tag), v.source);
  // Every value has a range: the profile's, or its tag's default (docs/latency-profiles.md, "Uncertainty").
  ValueRange r = value_range(v);
  fmt::print("{:<6}range {:.{}f}-{:.{}f}{} ({})\n", "", r.low_ms, decimals, r.high_ms, decimals,
             v.runs ? fmt::format(" over {} runs, {} iterations", v.runs, v.iterations) : std::string(),
             range_origin(v));
  if (v.distribution) {
    fmt::print("{:<6}per iteration (n={}): p5 {:.3f}, median {:.3f}, p95 {:.3f}, max {:.3f} ms\n", "",
               v.distribution->n, v.distribution->p5_ms, v.distribution->median_ms, v.distribution->p95_ms,
               v.distribution->max_ms);
  }
  if (!v.note.empty()) fmt::print("{:<6}{}\n", "", v.note);
}

Status show_profile(const std::string& name, bool json) {
  TPMSEC_ASSIGN_OR_RETURN(LatencyProfile p, as_input(load_profile(name)));
  if (json) {
    fmt::print("{}\n", to_json(p).dump(2));
    return ok_status();
  }
  ProfileSummary s = summarize(p);
  ExtendFigures f = extend_figures(p);
  const ProfileIdentity& id = p.identity;
  std::string vendor;
  for (const std::string& v : id.vendor_strings) {
    if (!v.empty()) vendor += fmt::format("{}\"{}\"", vendor.empty() ? "" : " ", v);
  }
  auto line = [](std::string_view key, const std::string& value) { fmt::print("{:<16}{}\n", key, value); };
  line("profile", fmt::format("{} ({})", p.id, profile_path(name)));
  line("name", p.name);
  line("reports", fmt::format("manufacturer \"{}\", vendor {}, firmware {} (marked emulated)", id.manufacturer,
                              vendor.empty() ? "(none)" : vendor, id.firmware.empty() ? "unknown" : id.firmware));
  line("bus", id.bus);
  line("identity from", id.source + (id.note.empty() ? "" : "; " + id.note));
  line("seed", std::to_string(p.seed));
  line("values", fmt::format("{}: {} M, {} D, {} P, {} E, {} B ({} measured or derived)", s.values, s.measured,
                             s.derived, s.proxy, s.estimate, s.bound, percent(s.measured_or_derived(), s.values)));
  line("per extend", fmt::format("plain {:.2f} ms, HMAC'd {:.2f} ms, per-command {:.2f} ms, saved-context {:.2f} ms",
                                 f.plain_ms, f.hmac_ms, f.per_command_ms, f.saved_context_ms));
  // The same sums with every value at the low, then high end of its range.
  ExtendFigures lo = extend_figures(profile_at(p, RangeEnd::kLow)), hi = extend_figures(profile_at(p, RangeEnd::kHigh));
  line("", fmt::format("ranges: plain {:.2f}-{:.2f}, HMAC'd {:.2f}-{:.2f}, per-command {:.2f}-{:.2f}, saved-context "
                       "{:.2f}-{:.2f} ms (docs/latency-profiles.md, \"Uncertainty\")",
                       lo.plain_ms, hi.plain_ms, lo.hmac_ms, hi.hmac_ms, lo.per_command_ms, hi.per_command_ms,
                       lo.saved_context_ms, hi.saved_context_ms));
  if (p.slots.max_loaded_sessions || p.slots.max_transient_objects) {
    line("slots", fmt::format("{} loaded sessions, {} transient objects ({})", p.slots.max_loaded_sessions,
                              p.slots.max_transient_objects, p.slots.source));
    if (p.slots.active_sessions_max || p.slots.context_gap_max) {
      line("", fmt::format("{} active sessions, context gap {} (0x{:X})", p.slots.active_sessions_max,
                           p.slots.context_gap_max, p.slots.context_gap_max));
    }
  } else {
    line("slots", "unknown");
  }
  if (!p.note.empty()) line("note", p.note);
  if (std::string w = provenance_warning(p); !w.empty()) line("WARNING", w);

  fmt::print("\n{:<27} {:>9}{:<5} {:>8}  {:<12} {}\n", "VARIANT", "MS", "", "JITTER", "TAG", "SOURCE");
  for (const auto& [variant, value] : p.commands) print_value(variant, value);
  print_value("hmac_session (added)", p.hmac_session);
  print_value("param_encryption_per_byte", p.param_encryption_per_byte, "/byte", 5);
  if (!p.tail_events.empty()) {
    fmt::print("\n{:<27} {:>11} {:>11}  {:<12} {:<8} {}\n", "TAIL EVENT", "PROBABILITY", "EXTRA MS", "TAG", "DEFAULT",
               "SOURCE");
    for (const TailEvent& t : p.tail_events) {
      fmt::print("{:<27} {:>11} {:>11.1f}  {}  {:<9} {:<8} {}\n", t.variant, t.probability, t.extra_ms, t.tag,
                 tag_name(t.tag), t.enabled ? "on" : "off", t.source);
      if (!t.note.empty()) fmt::print("{:<6}{}\n", "", t.note);
    }
  }
  return ok_status();
}

}  // namespace

void register_profiles(CLI::App& app, Action* action) {
  struct Options {
    bool json = false;
    bool show_json = false;
    bool names = false;
    std::string name;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("profiles", "List the latency profiles --emulate can use, with how much of each is measured");
  sub->add_flag("--json", opts->json, "Print JSON: per profile its tag counts and per-extend figures");
  auto* names = sub->add_flag("--names", opts->names,
                              "Print only the profile names, one a line (what shell completion offers for --emulate)");
  names->excludes("--json");
  sub->require_subcommand(0, 1);
  sub->footer(
      fmt::format("Profiles live in {} (one JSON file each). Every value carries its tag and source\n"
                  "(the sources of docs/latency-profiles.md, and the E rule used).\n\n{}",
                  profiles_dir(), kColumns));

  CLI::App* show = sub->add_subcommand("show", "Print every value of one profile with its tag, source and note");
  show->add_option("name", opts->name, "Profile name (e.g. slb9670) or path of a profile JSON file")->required();
  show->add_flag("--json", opts->show_json, "Print the profile as JSON (the file's content, normalized)");

  sub->callback([opts, action, show] {
    if (show->parsed()) {
      *action = [opts]() -> Status { return show_profile(opts->name, opts->show_json || opts->json); };
    } else {
      *action = [opts]() -> Status { return list_profiles(opts->json, opts->names); };
    }
  });
}

}  // namespace tpmsec::cli
