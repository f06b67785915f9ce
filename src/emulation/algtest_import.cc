// Latency profiles from tpm2-algtest result directories (TPMScan).
#include "tpmsec/emulation/algtest_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace tpmsec {
namespace {

namespace fs = std::filesystem;

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\r-");
  size_t e = s.find_last_not_of(" \t\r");
  if (b == std::string::npos) return {};
  return s.substr(b, e - b + 1);
}

std::string unquote(std::string s) {
  s = trim(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

bool read_text(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream b;
  b << in.rdbuf();
  *out = b.str();
  return !in.bad();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// One "- ..." entry of a performance.yaml section: its "key: value" pairs.
struct YamlEntry {
  std::string section;  // "TPM2_Sign"
  std::map<std::string, std::string> fields;
};

std::vector<YamlEntry> yaml_entries(const std::string& text, std::map<std::string, std::string>* header) {
  std::vector<YamlEntry> out;
  std::string section;
  for (const std::string& raw : lines_of(text)) {
    if (raw.empty() || trim(raw).empty()) continue;
    bool top = raw[0] != ' ' && raw[0] != '-';
    size_t colon = raw.find(':');
    if (top) {
      if (raw.rfind("TPM2_", 0) == 0 && colon != std::string::npos && trim(raw.substr(colon + 1)).empty()) {
        section = raw.substr(0, colon);
      } else if (colon != std::string::npos && section.empty()) {
        (*header)[raw.substr(0, colon)] = unquote(raw.substr(colon + 1));
      }
      continue;
    }
    if (section.empty()) continue;
    if (raw[raw.find_first_not_of(' ')] == '-') {
      out.push_back(YamlEntry{section, {}});
    }
    if (out.empty() || colon == std::string::npos) continue;
    out.back().fields[trim(raw.substr(0, colon))] = trim(raw.substr(colon + 1));
  }
  return out;
}

bool number(const std::string& s, double* v) {
  try {
    size_t used = 0;
    *v = std::stod(s, &used);
    return used > 0 && std::isfinite(*v);
  } catch (...) {
    return false;
  }
}

// The tpmsec key of an entry, or "".
std::string op_key(const YamlEntry& e) {
  auto f = [&](const char* k) {
    auto it = e.fields.find(k);
    return it == e.fields.end() ? std::string() : it->second;
  };
  const std::string& s = e.section;
  if (s == "TPM2_GetRandom" && f("data length (bytes)") == "32") return "GetRandom";
  if (s == "TPM2_Hash" && f("hash algorithm") == "0x000b" && f("data length (bytes)") == "256") return "Hash";
  if (s == "TPM2_HMAC" && (f("hash algorithm") == "SHA-256" || f("hash algorithm") == "0x000b") &&
      f("data length (bytes)") == "256") {
    return "HMAC";
  }
  if (s == "TPM2_Sign" && f("key parameters") == "ECC 0x0003" && f("scheme") == "0x0018") return "Sign.ecdsa_p256";
  if (s == "TPM2_RSA_Decrypt" && f("key parameters") == "RSA 2048" && f("scheme") == "0x0017") {
    return "RSA_Decrypt.oaep_2048";
  }
  if (s == "TPM2_Create" && f("key parameters") == "ECC 0x0003") return "Create.ecc_p256";
  if (s == "TPM2_Create" && f("key parameters") == "RSA 2048") return "Create.rsa_2048";
  if (s == "TPM2_ZGen" && f("key parameters") == "0x0003" && f("scheme") == "0x0019") return "ZGen_2Phase.p256";
  if (s == "TPM2_ECDH_ZGen" && f("key parameters") == "0x0003") return "ECDH_ZGen.p256";
  if (s == "TPM2_ECDH" && f("key parameters") == "ZGen 0x0003") return "ECDH_ZGen.p256";
  if (s == "TPM2_EncryptDecrypt" && f("algorithm") == "0x0006" && f("key length") == "128" && f("mode") == "0x0043" &&
      f("encrypt/decrypt?") == "decrypt" && f("data length (bytes)") == "256") {
    return "EncryptDecrypt.aes128_cfb";
  }
  return {};
}

// detail/Perf_*.csv per op key.
const std::map<std::string, std::vector<std::string>>& csv_files() {
  static const std::map<std::string, std::vector<std::string>> files = {
      {"GetRandom", {"Perf_GetRandom.csv"}},
      {"Hash", {"Perf_Hash:0x000b.csv"}},
      {"HMAC", {"Perf_HMAC.csv"}},
      {"Sign.ecdsa_p256", {"Perf_Sign:ECC_0x0003_0x0018.csv"}},
      {"RSA_Decrypt.oaep_2048", {"Perf_RSA_Decrypt:RSA_2048_0x0017.csv"}},
      {"Create.ecc_p256", {"Perf_Create:ECC_0x0003.csv"}},
      {"Create.rsa_2048", {"Perf_Create:RSA_2048.csv"}},
      {"ZGen_2Phase.p256", {"Perf_ZGen:0x0003_0x0019.csv"}},
      {"ECDH_ZGen.p256", {"Perf_ECDH_ZGen:0x0003.csv", "Perf_ECDH:ZGen_0x0003.csv"}},
  };
  return files;
}

// Successful iterations of a CSV (duration,duration_extra,return_code), in ms.
Result<std::vector<double>> read_csv(const fs::path& path) {
  std::string text;
  if (!read_text(path, &text)) return usage_error(fmt::format("{}: cannot read", path.string()));
  std::vector<double> out;
  size_t n = 0;
  for (const std::string& line : lines_of(text)) {
    ++n;
    if (n == 1 || trim(line).empty()) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cols.push_back(trim(c));
    double seconds = 0;
    if (cols.size() < 3 || !number(cols[0], &seconds) || seconds < 0) {
      return usage_error(fmt::format("{}: line {} is not 'duration,duration_extra,return_code'", path.string(), n));
    }
    if (cols[2] != "0000" && cols[2] != "0") continue;
    out.push_back(seconds * 1000.0);
  }
  return out;
}

// "TPM2_PT_X:\n  raw: 0x..\n  value: ..." -> name -> (raw, value).
std::map<std::string, std::pair<std::string, std::string>> fixed_properties(const std::string& text) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  std::string current;
  for (const std::string& raw : lines_of(text)) {
    if (raw.empty()) continue;
    size_t colon = raw.find(':');
    if (colon == std::string::npos) continue;
    if (raw[0] != ' ') {
      current = raw.substr(0, colon);
      out[current];
    } else if (!current.empty()) {
      std::string key = trim(raw.substr(0, colon));
      if (key == "raw") out[current].first = trim(raw.substr(colon + 1));
      if (key == "value") out[current].second = unquote(raw.substr(colon + 1));
    }
  }
  return out;
}

uint32_t raw_value(const std::map<std::string, std::pair<std::string, std::string>>& props, const char* name) {
  auto it = props.find(name);
  if (it == props.end() || it->second.first.empty()) return 0;
  try {
    return static_cast<uint32_t>(std::stoul(it->second.first, nullptr, 0));
  } catch (...) {
    return 0;
  }
}

// A property's 4 characters, from its raw value (big-endian; NULs and non-printable bytes dropped).
std::string chars_of(uint32_t raw) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) {
    char c = static_cast<char>((raw >> shift) & 0xff);
    if (c >= 0x20 && c <= 0x7e) s.push_back(c);  // printable ASCII only (profiles are JSON text)
  }
  return s;
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Linear-interpolated quantile of sorted data.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * double(sorted.size() - 1);
  size_t i = static_cast<size_t>(pos);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - double(i)) * (sorted[i + 1] - sorted[i]);
}

double round_to(double v, double unit) { return std::round(v / unit) * unit; }
double r3(double v) { return round_to(v, 0.001); }

// ---------------------------------------------------------------- reading a run

// VENDOR/FIRMWARE/RUN_ID: the last three components of the directory.
std::string label_of(const std::string& dir) {
  std::vector<std::string> parts;
  for (const auto& part : fs::path(dir).lexically_normal()) {
    if (!part.empty() && part != ".") parts.push_back(part.string());
  }
  while (!parts.empty() && parts.back().empty()) parts.pop_back();
  size_t from = parts.size() > 3 ? parts.size() - 3 : 0;
  std::string label;
  for (size_t i = from; i < parts.size(); ++i) label += (label.empty() ? "" : "/") + parts[i];
  return label;
}

// The identity and slot limits from detail/Capability_properties-fixed.txt;
// an error without a manufacturer.
Status read_properties(const std::string& props_text, const std::string& dir, AlgtestRun& run) {
  auto props = fixed_properties(props_text);
  uint32_t manufacturer = raw_value(props, "TPM2_PT_MANUFACTURER");
  run.manufacturer = chars_of(manufacturer);
  if (run.manufacturer.empty()) {
    return usage_error(fmt::format("{}: no TPM2_PT_MANUFACTURER in detail/Capability_properties-fixed.txt", dir));
  }
  for (int i = 0; i < 4; ++i) {
    run.vendor_strings[i] = chars_of(raw_value(props, fmt::format("TPM2_PT_VENDOR_STRING_{}", i + 1).c_str()));
  }
  uint32_t fw1 = raw_value(props, "TPM2_PT_FIRMWARE_VERSION_1");
  if (fw1) run.firmware = fmt::format("{}.{}", fw1 >> 16, fw1 & 0xffff);
  run.loaded_sessions = raw_value(props, "TPM2_PT_HR_LOADED_MIN");
  run.transient_objects = raw_value(props, "TPM2_PT_HR_TRANSIENT_MIN");
  run.active_sessions_max = raw_value(props, "TPM2_PT_ACTIVE_SESSIONS_MAX");
  run.context_gap_max = raw_value(props, "TPM2_PT_CONTEXT_GAP_MAX");
  return ok_status();
}

// The operations tpmsec uses (the first entry of each key that has its
// statistics; failed ones left out) and the header's firmware and device
// from performance.yaml; an error without a successful GetRandom.
Status read_operations(const std::string& yaml_text, const std::string& dir, AlgtestRun& run) {
  std::map<std::string, std::string> header;
  for (const YamlEntry& e : yaml_entries(yaml_text, &header)) {
    std::string key = op_key(e);
    if (key.empty() || run.ops.count(key)) continue;
    auto get = [&](const char* k, double* v) {
      auto it = e.fields.find(k);
      return it != e.fields.end() && number(it->second, v);
    };
    AlgtestOp op;
    double successful = 0;
    if (!get("avg op", &op.avg_ms) || !get("min op", &op.min_ms) || !get("max op", &op.max_ms) ||
        !get("successful", &successful)) {
      return usage_error(fmt::format("{}: performance.yaml: {} entry without avg/min/max op or successful", dir,
                                     e.section));
    }
    if (successful < 1 || op.avg_ms <= 0) continue;  // failed on this TPM
    op.iterations = static_cast<uint64_t>(successful);
    run.ops[key] = op;
  }
  run.firmware_full = header.count("Firmware version") ? header["Firmware version"] : "";
  run.device = header.count("Device name") ? header["Device name"] : "";
  if (!run.ops.count("GetRandom")) {
    return usage_error(fmt::format("{}: performance.yaml has no successful TPM2_GetRandom of 32 bytes", dir));
  }
  return ok_status();
}

// Per-iteration samples from detail/Perf_*.csv, for the operations read
// that have a file (the first of their names present).
Status read_samples(const fs::path& root, AlgtestRun& run) {
  std::error_code ec;
  for (const auto& [key, files] : csv_files()) {
    auto it = run.ops.find(key);
    if (it == run.ops.end()) continue;
    for (const std::string& file : files) {
      fs::path csv = root / "detail" / file;
      if (!fs::is_regular_file(csv, ec)) continue;
      TPMSEC_ASSIGN_OR_RETURN(it->second.samples_ms, read_csv(csv));
      break;
    }
  }
  return ok_status();
}

}  // namespace

Result<AlgtestRun> read_algtest_run(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return usage_error(fmt::format("{}: not a directory", dir));
  fs::path root(dir);
  fs::path yaml = root / "performance.yaml";
  fs::path props_path = root / "detail" / "Capability_properties-fixed.txt";
  std::string yaml_text, props_text;
  if (!fs::is_regular_file(yaml, ec) || !read_text(yaml, &yaml_text)) {
    return usage_error(fmt::format("{}: no readable performance.yaml (not a tpm2-algtest result directory)", dir));
  }
  if (!fs::is_regular_file(props_path, ec) || !read_text(props_path, &props_text)) {
    return usage_error(fmt::format("{}: no readable detail/Capability_properties-fixed.txt", dir));
  }
  AlgtestRun run;
  run.dir = dir;
  run.label = label_of(dir);
  TPMSEC_RETURN_IF_ERROR(read_properties(props_text, dir, run));
  TPMSEC_RETURN_IF_ERROR(read_operations(yaml_text, dir, run));
  TPMSEC_RETURN_IF_ERROR(read_samples(root, run));
  return run;
}

std::vector<bool> outlier_runs(const std::vector<double>& levels) {
  std::vector<bool> out(levels.size(), false);
  if (levels.size() < 3) return out;
  double med = median_of(levels);
  std::vector<double> dev;
  for (double v : levels) dev.push_back(std::fabs(v - med));
  double mad = 1.4826 * median_of(dev);
  for (size_t i = 0; i < levels.size(); ++i) {
    double d = std::fabs(levels[i] - med);
    out[i] = d > 3 * mad && d > 0.25 * med;
  }
  return out;
}

namespace {

// What the kept runs say about one operation.
struct Merged {
  bool present = false;
  double ms = 0;  // median of the runs' averages
  double low = 0, high = 0;
  uint32_t runs = 0;
  uint64_t iterations = 0;
  std::vector<double> samples;  // pooled per-iteration
  std::vector<std::string> labels;
};

Merged merge(const std::vector<const AlgtestRun*>& runs, const std::string& key) {
  Merged m;
  std::vector<double> avgs;
  for (const AlgtestRun* r : runs) {
    auto it = r->ops.find(key);
    if (it == r->ops.end()) continue;
    avgs.push_back(it->second.avg_ms);
    m.iterations += it->second.iterations;
    m.samples.insert(m.samples.end(), it->second.samples_ms.begin(), it->second.samples_ms.end());
    m.labels.push_back(r->label);
  }
  if (avgs.empty()) return m;
  m.present = true;
  m.runs = static_cast<uint32_t>(avgs.size());
  m.ms = median_of(avgs);
  m.low = *std::min_element(avgs.begin(), avgs.end());
  m.high = *std::max_element(avgs.begin(), avgs.end());
  std::sort(m.samples.begin(), m.samples.end());
  return m;
}

// Every run, grouped by VENDOR/FIRMWARE: "IFX/7.85.17.51968/{08836af27dda9f32,57dac75a27d6f427}".
std::string runs_text(const std::vector<std::string>& labels) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::string& label : labels) {
    size_t slash = label.rfind('/');
    std::string dir = slash == std::string::npos ? "" : label.substr(0, slash + 1);
    std::string run = slash == std::string::npos ? label : label.substr(slash + 1);
    if (groups.empty() || groups.back().first != dir) groups.push_back({dir, {}});
    groups.back().second.push_back(run);
  }
  std::vector<std::string> parts;
  for (const auto& [dir, runs] : groups) {
    parts.push_back(runs.size() == 1 ? dir + runs[0] : fmt::format("{}{{{}}}", dir, fmt::join(runs, ",")));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

struct Builder {
  std::string source;

  // A measured value: the median of the runs' averages, its range, and the
  // pooled distribution when per-iteration data exists.
  LatencyValue measured(const Merged& m, char tag, const std::string& what) const {
    LatencyValue v;
    v.ms = r3(m.ms);
    v.tag = tag;
    v.source = fmt::format("{} {}", source, runs_text(m.labels));
    v.runs = m.runs;
    v.iterations = m.iterations;
    if (m.runs > 1) {
      v.low_ms = r3(m.low);
      v.high_ms = r3(m.high);
    }
    double jitter = 0;
    if (m.samples.size() >= 20) {
      ValueDistribution d;
      d.n = m.samples.size();
      d.median_ms = r3(quantile(m.samples, 0.5));
      d.p5_ms = r3(quantile(m.samples, 0.05));
      d.p95_ms = r3(quantile(m.samples, 0.95));
      d.max_ms = r3(m.samples.back());
      v.distribution = d;
      jitter = (d.p95_ms - d.p5_ms) / 3.29;  // the stddev of a normal with that 90% range
    } else {
      jitter = (m.high - m.low) / 4;
    }
    v.jitter_ms = r3(std::clamp(jitter, 0.02 * v.ms, 0.3 * v.ms));
    v.note = fmt::format("{}: median of {} run average{} ({} iterations)", what, m.runs, m.runs == 1 ? "" : "s",
                         m.iterations);
    return v;
  }

  // A value derived by a rule; `error` (fraction) becomes its low/high.
  LatencyValue derived(double ms, char tag, const std::string& rule_source, const std::string& note,
                       double error) const {
    LatencyValue v;
    v.ms = r3(ms);
    v.jitter_ms = r3(0.02 * ms);
    v.tag = tag;
    v.source = rule_source;
    v.note = note;
    if (error > 0) {
      // error = derived / measured - 1 within +/- error: measured is between
      // ms / (1 + error) and ms / (1 - error).
      v.low_ms = r3(ms / (1 + error));
      v.high_ms = r3(ms / (1 - error));
      if (*v.low_ms > v.ms) v.low_ms = v.ms;
      if (*v.high_ms < v.ms) v.high_ms = v.ms;
    }
    return v;
  }
};

double stated_error(const char* variant) {
  for (const RuleError& e : kRuleErrors) {
    if (std::string_view(e.variant) == variant) return e.error;
  }
  return 0;
}


// ---------------------------------------------------------------- the runs

// Runs of one chip only: every run's manufacturer is the first run's.
Status check_one_chip(const std::vector<AlgtestRun>& runs) {
  if (runs.empty()) return usage_error("no tpm2-algtest result directory given");
  for (const AlgtestRun& r : runs) {
    if (r.manufacturer != runs[0].manufacturer) {
      return usage_error(fmt::format("{} is manufacturer '{}' but {} is '{}': give runs of one chip", r.dir,
                                     r.manufacturer, runs[0].dir, runs[0].manufacturer));
    }
  }
  return ok_status();
}

// The runs the outlier rule keeps (on each run's GetRandom level), in
// order; `out` records their labels and, for the others, why they went.
std::vector<const AlgtestRun*> drop_outliers(const std::vector<AlgtestRun>& runs, AlgtestImport& out) {
  std::vector<double> levels;
  for (const AlgtestRun& r : runs) levels.push_back(r.ops.at("GetRandom").avg_ms);
  std::vector<bool> outlier = outlier_runs(levels);
  double level_median = median_of(levels);
  std::vector<const AlgtestRun*> kept;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (outlier[i]) {
      out.excluded.push_back(fmt::format("{}: GetRandom {:.2f} ms against the runs' median {:.2f} ms (outlier rule)",
                                         runs[i].label, levels[i], level_median));
    } else {
      kept.push_back(&runs[i]);
      out.used.push_back(runs[i].label);
    }
  }
  return kept;
}

// The run the profile's identity is read from: the first kept run of the
// most common firmware among the kept runs.
struct ReferenceRun {
  const AlgtestRun* run = nullptr;
  std::string firmware;
};

ReferenceRun reference_run(const std::vector<const AlgtestRun*>& kept) {
  std::map<std::string, size_t> fw_count;
  for (const AlgtestRun* r : kept) ++fw_count[r->firmware];
  ReferenceRun ref;
  ref.firmware =
      std::max_element(fw_count.begin(), fw_count.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  ref.run = kept[0];
  for (const AlgtestRun* r : kept) {
    if (r->firmware == ref.firmware) {
      ref.run = r;
      break;
    }
  }
  return ref;
}

// ---------------------------------------------------------------- identity and slots

// The profile's name and identity: the reference run's manufacturer and
// firmware, the vendor strings every kept run shares, and a note listing
// what the merged runs report.
void set_identity(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const ReferenceRun& reference,
                  const AlgtestImportOptions& options, const std::string& source) {
  const AlgtestRun* ref = reference.run;
  std::set<std::string> fulls, devices;
  for (const AlgtestRun* r : kept) {
    fulls.insert(r->firmware_full);
    if (!r->device.empty()) devices.insert(r->device);
  }
  std::string vendor;
  for (const std::string& v : ref->vendor_strings) vendor += v;
  std::set<std::string> vendors;
  for (const AlgtestRun* r : kept) {
    std::string v;
    for (const std::string& part : r->vendor_strings) v += part;
    vendors.insert(v);
  }
  p.name = options.name.empty() ? fmt::format("{} {}", trim(ref->manufacturer), vendor) : options.name;
  p.identity.manufacturer = ref->manufacturer;
  // Vendor strings the kept runs agree on, up to the first that differs
  // (policy rules match them as a prefix; NPCT75x parts vary in the third).
  for (size_t i = 0; i < 4; ++i) {
    bool agree = std::all_of(kept.begin(), kept.end(),
                             [&](const AlgtestRun* r) { return r->vendor_strings[i] == ref->vendor_strings[i]; });
    if (!agree) break;
    p.identity.vendor_strings[i] = ref->vendor_strings[i];
  }
  p.identity.firmware = reference.firmware;
  p.identity.bus = "unknown (kernel driver)";  // algtest does not record the bus
  p.identity.source = fmt::format("{} {} (detail/Capability_properties-fixed.txt)", source, ref->label);
  p.identity.note = fmt::format("vendor strings of the merged runs: {} (the profile keeps those they share); firmware "
                                "versions: {}; machines: {}",
                                fmt::join(vendors, ", "), fmt::join(fulls, ", "),
                                devices.empty() ? "not recorded" : fmt::format("{}", fmt::join(devices, ", ")));
}

// A profile's seed from its id: the same id always models the same jitter.
uint64_t seed_of(const std::string& id) {
  uint64_t seed = 0;
  for (char c : id) seed = seed * 131 + static_cast<unsigned char>(c);
  return seed % 1000000;
}

// The chip's slot limits, when the reference run reports them.
void set_slots(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const ReferenceRun& reference,
               const std::string& source) {
  const AlgtestRun* ref = reference.run;
  std::map<std::string, size_t> slot_count;
  for (const AlgtestRun* r : kept) {
    ++slot_count[fmt::format("{}/{}/{}/{}", r->loaded_sessions, r->transient_objects, r->active_sessions_max,
                             r->context_gap_max)];
  }
  if (!ref->loaded_sessions && !ref->transient_objects) return;
  // Runs of one firmware line can disagree (NPCT75x 7.2.0.x: 3 slots, gap
  // 65535; 7.2.1/7.2.2: 5 slots, gap 255). Each limit is the strictest a
  // merged run reports (0: not reported), so a strategy that copes with
  // the emulated chip copes with every part the profile stands for.
  auto strictest = [&](uint32_t AlgtestRun::*field) {
    uint32_t v = 0;
    for (const AlgtestRun* r : kept) {
      if (r->*field && (v == 0 || r->*field < v)) v = r->*field;
    }
    return v;
  };
  p.slots.max_loaded_sessions = strictest(&AlgtestRun::loaded_sessions);
  p.slots.max_transient_objects = strictest(&AlgtestRun::transient_objects);
  p.slots.active_sessions_max = strictest(&AlgtestRun::active_sessions_max);
  p.slots.context_gap_max = strictest(&AlgtestRun::context_gap_max);
  p.slots.source = fmt::format("{} {} (M: TPM2_PT_HR_LOADED_MIN, TPM2_PT_HR_TRANSIENT_MIN, "
                               "TPM2_PT_ACTIVE_SESSIONS_MAX, TPM2_PT_CONTEXT_GAP_MAX)",
                               source, ref->label);
  if (slot_count.size() == 1) {
    p.slots.note = "the TPM's own fixed properties; every merged run reports the same";
    return;
  }
  std::vector<std::string> reported;
  for (auto& [k, n] : slot_count) reported.push_back(fmt::format("{} x{}", k, n));
  p.slots.note = fmt::format("the strictest of the TPM's own fixed properties of firmware {} (each limit the "
                             "lowest a merged run reports); the merged runs report "
                             "(sessions/objects/active/gap): {}",
                             reference.firmware, fmt::join(reported, ", "));
}

// ---------------------------------------------------------------- values

// The values of a profile from the merged operations, by the rules of
// docs/latency-profiles.md ("Rules for profiles from tpm2-algtest"): M for
// what algtest measures, P for key creation, D by the rules A1-A6, E where
// no rule has a measured basis. Every rule scales from the short command
// level `s` (GetRandom(32) on the same driver path).
class ValueRules {
 public:
  ValueRules(const std::vector<const AlgtestRun*>& kept, const std::string& source)
      : b_{source},
        source_(source),
        get_random_(merge(kept, "GetRandom")),
        hash_(merge(kept, "Hash")),
        hmac_(merge(kept, "HMAC")),
        ecdsa_(merge(kept, "Sign.ecdsa_p256")),
        oaep_(merge(kept, "RSA_Decrypt.oaep_2048")),
        create_ecc_(merge(kept, "Create.ecc_p256")),
        create_rsa_(merge(kept, "Create.rsa_2048")),
        zgen2_(merge(kept, "ZGen_2Phase.p256")),
        ecdh_(merge(kept, "ECDH_ZGen.p256")),
        aes_(merge(kept, "EncryptDecrypt.aes128_cfb")),
        s_(get_random_.ms),
        short_text_(fmt::format("GetRandom(32) {:.2f} ms (M)", s_)) {}

  // Every value of `p`: command variants, tail events, the session and
  // encryption costs.
  void set_values(LatencyProfile& p) const {
    p.commands["GetRandom"] = b_.measured(get_random_, kTagMeasured, "TPM2_GetRandom of 32 bytes");
    p.commands["FlushContext"] = short_value("FlushContext");
    p.commands["PCR_Read"] = short_value("PCR_Read");
    p.commands["StartAuthSession.unsalted"] = short_value("unsalted StartAuthSession (nonce generation only)");
    p.commands["default"] = short_value("any other command");
    set_hash_values(p);
    p.commands["StartAuthSession.ecc"] = ecc_session();
    p.commands["StartAuthSession.rsa"] = rsa_session();
    set_context_values(p);
    p.commands["CreatePrimary.ecc"] = create_primary_ecc();
    set_create_primary_rsa(p);
    p.hmac_session = hmac_session();
    p.param_encryption_per_byte = param_encryption_per_byte();
  }

 private:
  // A3: every short command costs what GetRandom(32) does on the same path.
  LatencyValue short_value(const char* what) const {
    return b_.derived(s_, kTagDerived, fmt::format("{} {}, rule A3", source_, runs_text(get_random_.labels)),
                      fmt::format("rule A3 ({}): {} ~ a short command = {}", kRules, what, short_text_),
                      stated_error("FlushContext"));
  }

  // Hash is measured; A4: PCR_Extend (one SHA-256 bank) ~ Hash of 256 bytes.
  void set_hash_values(LatencyProfile& p) const {
    if (!hash_.present) {
      p.commands["Hash"] = short_value("Hash (no successful TPM2_Hash in the runs)");
      p.commands["PCR_Extend"] = short_value("PCR_Extend (no TPM2_Hash in the runs)");
      return;
    }
    p.commands["Hash"] = b_.measured(hash_, kTagMeasured, "TPM2_Hash SHA-256 of 256 bytes");
    p.commands["PCR_Extend"] = b_.derived(
        hash_.ms, kTagDerived, fmt::format("{} {}, rule A4", source_, runs_text(hash_.labels)),
        fmt::format("rule A4 ({}): PCR_Extend ~ TPM2_Hash SHA-256 of 256 bytes {:.2f} ms (M): a digest and a PCR "
                    "update are hash work plus the command overhead",
                    kRules, hash_.ms),
        stated_error("PCR_Extend"));
  }

  // A1: ECC-salted StartAuthSession: one P-256 ECDH (the salt's KDFe point
  // multiplication) plus a short command. ECDH_ZGen is that operation;
  // ZGen_2Phase does two multiplications; ECDSA sign one, as a last resort.
  LatencyValue ecc_session() const {
    double ms = 0;
    std::string how;
    const Merged* basis = nullptr;
    if (ecdh_.present) {
      ms = ecdh_.ms + s_;
      how = fmt::format("ECDH_ZGen P-256 {:.2f} ms (M) + {}", ecdh_.ms, short_text_);
      basis = &ecdh_;
    } else if (zgen2_.present) {
      ms = (zgen2_.ms + s_) / 2 + s_;
      how = fmt::format("half of ZGen_2Phase P-256 {:.2f} ms (M; two multiplications, one command overhead) + {}",
                        zgen2_.ms, short_text_);
      basis = &zgen2_;
    } else if (ecdsa_.present) {
      ms = ecdsa_.ms + s_;
      how = fmt::format("ECDSA P-256 sign {:.2f} ms (M; one multiplication, no ECDH measured) + {}", ecdsa_.ms,
                        short_text_);
      basis = &ecdsa_;
    }
    if (!basis) {
      return b_.derived(4 * s_, kTagEstimate, "rule A1 fallback",
                        "rule A1: no ECC operation succeeded; 4 x a short command", 0);
    }
    return b_.derived(ms, kTagDerived, fmt::format("{} {}, rule A1", source_, runs_text(basis->labels)),
                      fmt::format("rule A1 ({}): ECC-salted StartAuthSession ~ {}", kRules, how),
                      stated_error("StartAuthSession.ecc"));
  }

  // A2: RSA-salted StartAuthSession: the OAEP decrypt of the salt plus a short command.
  LatencyValue rsa_session() const {
    if (!oaep_.present) {
      return b_.derived(100 * s_, kTagEstimate, "rule A2 fallback",
                        "rule A2: no RSA-2048 OAEP decrypt succeeded; 100 x a short command", 0);
    }
    return b_.derived(
        oaep_.ms + s_, kTagDerived, fmt::format("{} {}, rule A2", source_, runs_text(oaep_.labels)),
        fmt::format("rule A2 ({}): RSA-salted StartAuthSession ~ RSA-2048 OAEP decrypt {:.2f} ms (M) + {}; not "
                    "validated (no chip has a measured RSA-salted StartAuthSession)",
                    kRules, oaep_.ms, short_text_),
        0);
  }

  // A5: ContextLoad of a key ~ 12 short commands (E rule 5 with the short
  // command for FlushContext); a session's ContextLoad (E rule 5) and
  // ContextSave (T1) are estimates from it and the short command.
  void set_context_values(LatencyProfile& p) const {
    double load = 12 * s_;
    p.commands["ContextLoad.object"] =
        b_.derived(load, kTagDerived, fmt::format("{} {}, rule A5", source_, runs_text(get_random_.labels)),
                   fmt::format("rule A5 ({}): ContextLoad of a key ~ 12 x FlushContext (E rule 5) = 12 x {}", kRules,
                               short_text_),
                   stated_error("ContextLoad.object"));
    p.commands["ContextLoad.session"] = b_.derived(
        load, kTagEstimate, "E rule 5",
        fmt::format("E rule 5: ContextLoad of a session is measured on no chip; = ContextLoad of a key {:.2f} ms "
                    "(the seed thread's guess, an upper bound)",
                    load),
        0);
    for (const char* v : {"ContextSave.object", "ContextSave.session"}) {
      p.commands[v] = b_.derived(4 * s_, kTagEstimate, "tpmsec rule T1",
                                 fmt::format("tpmsec rule T1: ContextSave ~ 4 x FlushContext = 4 x {}", short_text_),
                                 0);
    }
  }

  // P: CreatePrimary of an ECC key ~ TPM2_Create of one (A7 when none succeeded).
  LatencyValue create_primary_ecc() const {
    if (!create_ecc_.present) {
      return b_.derived(50 * s_, kTagEstimate, "rule A7 fallback",
                        "rule A7: no ECC Create succeeded; 50 x a short command", 0);
    }
    return b_.measured(create_ecc_, kTagProxy, "Proxy: TPM2_Create of an ECC P-256 key");
  }

  // P: CreatePrimary of an RSA key ~ TPM2_Create of one. Key generation is
  // heavy-tailed: with per-iteration data the value is the pooled median and
  // the mean of the top 5% of draws becomes a tail event.
  void set_create_primary_rsa(LatencyProfile& p) const {
    if (!create_rsa_.present) {
      p.commands["CreatePrimary.rsa"] = b_.derived(1000 * s_, kTagEstimate, "rule A7 fallback",
                                                   "rule A7: no RSA Create succeeded; 1000 x a short command", 0);
      return;
    }
    LatencyValue v = b_.measured(create_rsa_, kTagProxy, "Proxy: TPM2_Create of an RSA-2048 key");
    if (create_rsa_.samples.size() >= 20) {
      const std::vector<double>& x = create_rsa_.samples;
      double med = quantile(x, 0.5);
      size_t top_from = static_cast<size_t>(std::floor(0.95 * double(x.size())));
      double top_sum = 0;
      for (size_t i = top_from; i < x.size(); ++i) top_sum += x[i];
      double top_mean = top_sum / double(x.size() - top_from);
      v.ms = r3(med);
      v.jitter_ms = r3(0.3 * med);
      v.low_ms.reset();  // the run averages' range is of means, not of this median
      v.high_ms.reset();
      v.note += fmt::format("; ms is the pooled median of {} key generations (their p95 and the tail event carry "
                            "the rest)",
                            x.size());
      TailEvent t;
      t.variant = "CreatePrimary.rsa";
      t.probability = 0.05;
      t.extra_ms = r3(top_mean - med);
      t.tag = kTagDerived;
      t.source = v.source;
      t.note = fmt::format("the slowest 5% of {} measured RSA-2048 key generations average {:.0f} ms against a "
                           "median of {:.0f} ms",
                           x.size(), top_mean, med);
      t.enabled = true;
      p.tail_events.push_back(t);
    }
    p.commands["CreatePrimary.rsa"] = v;
  }

  // A6: the HMAC session's added cost ~ one TPM2_HMAC of 256 bytes.
  LatencyValue hmac_session() const {
    if (!hmac_.present) {
      return b_.derived(4 * s_, kTagEstimate, "rule A6 fallback",
                        "rule A6: no successful TPM2_HMAC; 4 x a short command", 0);
    }
    return b_.derived(
        hmac_.ms, kTagDerived, fmt::format("{} {}, rule A6", source_, runs_text(hmac_.labels)),
        fmt::format("rule A6 ({}): HMAC session overhead ~ TPM2_HMAC SHA-256 of 256 bytes {:.2f} ms (M): the "
                    "command and response HMACs and the nonce",
                    kRules, hmac_.ms),
        stated_error("hmac_session"));
  }

  // A8: parameter encryption per byte from AES-128-CFB EncryptDecrypt of 256
  // bytes, less a short command; T2 (an estimate scaled by the HMAC cost) without it.
  LatencyValue param_encryption_per_byte() const {
    if (aes_.present && aes_.ms > s_) {
      LatencyValue v = b_.derived(
          (aes_.ms - s_) / 256.0, kTagDerived, fmt::format("{} {}, rule A8", source_, runs_text(aes_.labels)),
          fmt::format("rule A8 ({}): (EncryptDecrypt AES-128-CFB of 256 bytes {:.2f} ms (M) - {}) / 256; not validated",
                      kRules, aes_.ms, short_text_),
          0);
      v.ms = round_to((aes_.ms - s_) / 256.0, 1e-6);
      v.jitter_ms = round_to(v.ms * 0.02, 1e-7);
      return v;
    }
    double ratio = hmac_.present ? hmac_.ms / 14.61 : 1.0;
    LatencyValue v = b_.derived(
        0.005 * ratio, kTagEstimate, "tpmsec rule T2",
        fmt::format("tpmsec rule T2 (pure estimate): 0.005 ms per byte on the SLB9670, scaled by the HMAC ratio "
                    "{:.2f} / 14.61 ms; no AES-128-CFB EncryptDecrypt succeeded in the runs",
                    hmac_.present ? hmac_.ms : 14.61),
        0);
    v.ms = round_to(0.005 * ratio, 1e-6);
    v.jitter_ms = round_to(0.0001 * ratio, 1e-7);
    return v;
  }

  static constexpr const char* kRules = "docs/latency-profiles.md";
  Builder b_;
  std::string source_;
  Merged get_random_, hash_, hmac_, ecdsa_, oaep_, create_ecc_, create_rsa_, zgen2_, ecdh_, aes_;
  double s_;                // a short command on this chip, driver path included
  std::string short_text_;  // how notes cite it
};

// What the profile is, for its note: how many runs from where, and how many were excluded.
std::string import_note(size_t kept_runs, const std::string& source, const AlgtestImport& out) {
  return fmt::format(
      "From {} tpm2-algtest run{} ({}) through the Linux driver, password sessions{}. M: measured operations; P: key "
      "creation for CreatePrimary; D: the rules A1-A6 of docs/latency-profiles.md (their error on the SLB9670 is the "
      "low/high); E: rules with no validation.",
      kept_runs, kept_runs == 1 ? "" : "s", source,
      out.excluded.empty() ? "" : fmt::format("; excluded by the outlier rule: {}", out.excluded.size()));
}

// ---------------------------------------------------------------- an earlier profile

// Whether an earlier profile's value beats the imported one: its M values,
// and its D values where the import is not M. A D value an earlier import
// made by a rule A* is not kept: re-importing must apply today's rules.
// Neither is an M value an earlier import made (it has runs): re-importing
// the same runs must give the same profile.
bool earlier_is_better(const LatencyValue& kept_value, const LatencyValue& imported) {
  if (kept_value.runs > 0) return false;
  if (kept_value.tag == kTagMeasured) return true;
  return kept_value.tag == kTagDerived && imported.tag != kTagMeasured && kept_value.note.rfind("rule A", 0) != 0;
}

// Replaces the imported values the earlier profile beats; the names of those kept.
std::vector<std::string> keep_better_values(LatencyProfile& p, const LatencyProfile& k) {
  std::vector<std::string> kept_names;
  for (auto& [variant, value] : p.commands) {
    auto it = k.commands.find(variant);
    if (it != k.commands.end() && earlier_is_better(it->second, value)) {
      value = it->second;
      kept_names.push_back(variant);
    }
  }
  if (earlier_is_better(k.hmac_session, p.hmac_session)) {
    p.hmac_session = k.hmac_session;
    kept_names.push_back("hmac_session");
  }
  if (earlier_is_better(k.param_encryption_per_byte, p.param_encryption_per_byte)) {
    p.param_encryption_per_byte = k.param_encryption_per_byte;
    kept_names.push_back("param_encryption_per_byte");
  }
  return kept_names;
}

// The earlier profile's tail events, but for CreatePrimary.rsa's (the
// import's own, from its key generations), followed by the import's.
void keep_tail_events(LatencyProfile& p, const LatencyProfile& k) {
  std::vector<TailEvent> tails;
  for (const TailEvent& t : k.tail_events) {
    if (t.variant != "CreatePrimary.rsa") tails.push_back(t);
  }
  for (const TailEvent& t : p.tail_events) tails.push_back(t);
  p.tail_events = tails;
}

// The E rules T1 and 5 scale FlushContext and ContextLoad of a key: when
// those were kept as measured, the estimates follow them, as in the earlier profile.
void rescale_estimates(LatencyProfile& p, const Builder& b) {
  const LatencyValue& flush = p.commands["FlushContext"];
  if (flush.tag == kTagMeasured) {
    for (const char* v : {"ContextSave.object", "ContextSave.session"}) {
      LatencyValue& save = p.commands[v];
      if (save.tag != kTagEstimate) continue;
      save = b.derived(4 * flush.ms, kTagEstimate, "tpmsec rule T1",
                       fmt::format("tpmsec rule T1: ContextSave ~ 4 x FlushContext = 4 x {:.2f} ms (M, {})", flush.ms,
                                   flush.source),
                       0);
    }
  }
  const LatencyValue& load_object = p.commands["ContextLoad.object"];
  if (load_object.tag == kTagMeasured && p.commands["ContextLoad.session"].tag == kTagEstimate) {
    p.commands["ContextLoad.session"] = b.derived(
        load_object.ms, kTagEstimate, "E rule 5",
        fmt::format("E rule 5: ContextLoad of a session is measured on no chip; = ContextLoad of a key {:.2f} ms "
                    "(M, {}), the seed thread's guess and an upper bound",
                    load_object.ms, load_object.source),
        0);
  }
}

// What an earlier profile of the chip (--keep) contributes: the values that
// beat the import, its tail events, bus and seed, and its own note.
void keep_earlier(LatencyProfile& p, const LatencyProfile& k, const Builder& b) {
  std::vector<std::string> kept_names = keep_better_values(p, k);
  keep_tail_events(p, k);
  rescale_estimates(p, b);
  p.identity.bus = k.identity.bus;
  p.seed = k.seed;
  if (kept_names.empty()) return;
  p.note += fmt::format(" Kept from the earlier profile (measured beats derived): {}.", fmt::join(kept_names, ", "));
  // The earlier profile's own note, not one an earlier import wrote.
  std::string earlier = k.note;
  if (earlier.find("tpm2-algtest run") != std::string::npos) {
    size_t at = earlier.find(" Its note: ");
    earlier = at == std::string::npos ? std::string() : earlier.substr(at + 11);
  }
  if (!earlier.empty()) p.note += " Its note: " + earlier;
}

}  // namespace

Result<AlgtestImport> profile_from_algtest(const std::vector<AlgtestRun>& runs, const AlgtestImportOptions& options) {
  TPMSEC_RETURN_IF_ERROR(check_one_chip(runs));
  AlgtestImport out;
  std::vector<const AlgtestRun*> kept = drop_outliers(runs, out);
  ReferenceRun reference = reference_run(kept);
  std::string source = options.source.empty() ? "tpm2-algtest" : options.source;

  LatencyProfile& p = out.profile;
  p.id = options.id;
  set_identity(p, kept, reference, options, source);
  p.seed = seed_of(options.id);
  set_slots(p, kept, reference, source);
  ValueRules(kept, source).set_values(p);
  p.note = import_note(kept.size(), source, out);
  if (options.keep) keep_earlier(p, *options.keep, Builder{source});
  return out;
}

}  // namespace tpmsec
