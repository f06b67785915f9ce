#include "tpmsec/measure/profile_from_bench.h"

#include <fmt/format.h>

#include <map>

#include "tpmsec/emulation/profile_file.h"

namespace tpmsec {
namespace {

// Bench primitive name -> profile variant.
const std::map<std::string, std::string>& variant_of_primitive() {
  static const std::map<std::string, std::string> m{
      {"PCR_Extend (password)", "PCR_Extend"},
      {"PCR_Read", "PCR_Read"},
      {"GetRandom(32)", "GetRandom"},
      {"StartAuthSession (unsalted)", "StartAuthSession.unsalted"},
      {"StartAuthSession (ECC salt)", "StartAuthSession.ecc"},
      {"StartAuthSession (RSA salt)", "StartAuthSession.rsa"},
      {"ContextLoad (session)", "ContextLoad.session"},
      {"ContextLoad (null key)", "ContextLoad.object"},
      {"ContextSave (session)", "ContextSave.session"},
      {"ContextSave (null key)", "ContextSave.object"},
      {"FlushContext", "FlushContext"},
      {"CreatePrimary (null key, ECC)", "CreatePrimary.ecc"},
  };
  return m;
}

nlohmann::json value(double ms, double jitter, const char* tag, const std::string& source, const std::string& note) {
  return {{"ms", ms}, {"jitter_ms", jitter}, {"tag", std::string(1, tag[0])}, {"source", source}, {"note", note}};
}

// A result a profile can come from: a real TPM's bench run, or an ftrace
// import that names the manufacturer.
Status check_bench_result(const nlohmann::json& bench, const std::string& origin) {
  if (!bench.is_object() || bench.value("schema", "") != "tpmsec-bench/1") {
    return usage_error(fmt::format("{}: not a tpmsec bench result (schema tpmsec-bench/1)", origin));
  }
  const auto& tpm = bench.at("tpm");
  if (tpm.value("emulated", false) || bench.value("clock", "") == "virtual") {
    return usage_error(
        fmt::format("{}: this result comes from an emulated TPM (profile {}); a profile must come "
                    "from a real TPM",
                    origin, tpm.value("profile", "?")));
  }
  if (tpm.value("imported", "") == "ftrace" && tpm.value("manufacturer", "").empty()) {
    return usage_error(
        fmt::format("{}: the import names no manufacturer, which a profile needs (import again with "
                    "tpmsec trace import --manufacturer IFX ...)",
                    origin));
  }
  return ok_status();
}

// The measured variants (tagged M), from the primitives' medians; `median`
// gets every primitive's, by name.
nlohmann::json measured_commands(const nlohmann::json& bench, const std::string& source,
                                 std::map<std::string, double>& median) {
  nlohmann::json commands = nlohmann::json::object();
  for (const auto& p : bench.at("primitives")) {
    std::string name = p.at("name").get<std::string>();
    const auto& d = p.at("tpm_ms");
    double med = d.at("median").get<double>(), p90 = d.at("p90").get<double>();
    median[name] = med;
    auto it = variant_of_primitive().find(name);
    if (it == variant_of_primitive().end()) continue;
    // Normal jitter whose 90th percentile matches the sample's.
    double jitter = std::max(0.0, (p90 - med) / 1.2816);
    commands[it->second] = value(med, jitter, "M", source, fmt::format("median of {} samples", d.value("n", 0)));
  }
  return commands;
}

// Not measured: derived from what was, tagged E with the rule. `plain`: the
// password PCR_Extend's median.
void add_estimates(nlohmann::json& commands, double plain, const std::string& source) {
  auto estimate = [&](const char* variant, double ms, const std::string& rule) {
    if (!commands.contains(variant)) commands[variant] = value(ms, ms * 0.02, "E", source, "not measured: " + rule);
  };
  auto ms_of = [&](const char* variant) { return commands.at(variant).at("ms").get<double>(); };
  const std::string short_rule =
      "a short command, taken as the password PCR_Extend (docs/latency-profiles.md, E rule 3)";
  estimate("PCR_Read", plain, short_rule);
  estimate("GetRandom", plain, short_rule);
  estimate("FlushContext", plain, short_rule);
  estimate("StartAuthSession.unsalted", plain, short_rule);
  estimate("ContextLoad.object", 12 * ms_of("FlushContext"), "ContextLoad of a key ~ 12 x FlushContext (E rule 5)");
  estimate("ContextLoad.session", ms_of("ContextLoad.object"),
           "a session's ContextLoad taken as a key's, the seed thread's guess (E rule 5)");
  estimate("ContextSave.object", 4 * ms_of("FlushContext"), "ContextSave ~ 4 x FlushContext (tpmsec rule T1)");
  estimate("ContextSave.session", 4 * ms_of("FlushContext"), "ContextSave ~ 4 x FlushContext (tpmsec rule T1)");
  estimate("CreatePrimary.ecc", 2.7 * ms_of("StartAuthSession.ecc"),
           "2.7 x the ECC-salted StartAuthSession, the ratio of the slb9670 profile (a placeholder: measure it)");
  if (!commands.contains("StartAuthSession.rsa")) {
    commands["StartAuthSession.rsa"] = value(ms_of("StartAuthSession.ecc") * 2, 0, "E", source,
                                             "not measured (no RSA null key): 2 x the ECC-salted StartAuthSession");
  }
  for (const char* v : {"Hash", "default"}) {
    commands[v] = value(ms_of("PCR_Read"), ms_of("PCR_Read") * 0.02, "E", source,
                        "not measured: a short command, taken as PCR_Read (docs/latency-profiles.md, E rule 3)");
  }
  if (!commands.contains("CreatePrimary.rsa")) {
    commands["CreatePrimary.rsa"] = value(ms_of("CreatePrimary.ecc") * 10, 0, "E", source,
                                          "not measured: 10 x the ECC CreatePrimary (RSA key generation)");
  }
}

// The profile file (profile_file.h's format) around the values.
nlohmann::json profile_json(const nlohmann::json& tpm, const std::string& id, const std::string& origin,
                            const std::string& source, const nlohmann::json& commands,
                            const nlohmann::json& hmac_value) {
  std::vector<std::string> vendor;
  for (const auto& v : tpm.value("vendor_strings", nlohmann::json::array())) vendor.push_back(v.get<std::string>());
  while (vendor.size() < 4) vendor.push_back("");
  return {
      {"id", id},
      {"name", tpm.value("imported", "") == "ftrace"
                   ? fmt::format("{} (ftrace import)", tpm.value("label", "unknown TPM"))
                   : fmt::format("{} {} (measured)", tpm.value("manufacturer", "?"), tpm.value("vendor", ""))},
      {"note",
       fmt::format("Made by `tpmsec profile from-bench` from {}: values tagged M are that run's medians.", origin)},
      {"identity",
       {{"manufacturer", tpm.value("manufacturer", "")},
        {"vendor_strings", vendor},
        {"firmware", tpm.value("firmware_version", "")},
        {"bus", "unknown"},
        {"source", source}}},
      {"seed", uint64_t{1}},
      {"commands", commands},
      {"hmac_session", hmac_value},
      {"param_encryption_per_byte", value(0, 0, "E", source, "not measured by bench")},
      {"tail_events", nlohmann::json::array()},
      {"slots",
       {{"max_loaded_sessions", tpm.value("max_loaded_sessions", uint64_t{0})},
        {"max_transient_objects", tpm.value("max_transient_objects", uint64_t{0})},
        {"source", source},
        {"note", "as the TPM reported them"}}},
  };
}

}  // namespace

Result<LatencyProfile> profile_from_bench(const nlohmann::json& bench, const std::string& id,
                                          const std::string& origin) {
  try {
    TPMSEC_RETURN_IF_ERROR(check_bench_result(bench, origin));
    std::string source = fmt::format("tpmsec bench {} on {} ({})", bench.value("date", "?"),
                                     bench.value("transport", "?"), bench.value("tpmsec_version", "?"));
    std::map<std::string, double> median;
    nlohmann::json commands = measured_commands(bench, source, median);
    // A bench run measures every primitive; an ftrace import (docs/compare.md)
    // only what the kernel sent. These three have no estimate.
    for (const char* needed : {"PCR_Extend (password)", "PCR_Extend (HMAC session)", "StartAuthSession (ECC salt)"}) {
      if (!median.count(needed)) {
        return usage_error(
            fmt::format("{}: the result has no '{}' primitive (run bench without --no-primitives, or "
                        "import captures of both a plain and an HMAC-protected extend)",
                        origin, needed));
      }
    }
    double plain = median["PCR_Extend (password)"];
    double hmac = std::max(0.0, median["PCR_Extend (HMAC session)"] - plain);
    nlohmann::json hmac_value =
        value(hmac, hmac * 0.02, "D", source, "HMAC'd PCR_Extend median minus password PCR_Extend median");
    add_estimates(commands, plain, source);
    return profile_from_json(profile_json(bench.at("tpm"), id, origin, source, commands, hmac_value), origin);
  } catch (const nlohmann::json::exception& e) {
    return usage_error(fmt::format("{}: malformed bench result: {}", origin, e.what()));
  }
}

}  // namespace tpmsec
