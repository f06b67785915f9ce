// One tpm2-algtest result directory read into an AlgtestRun: the chip's
// identity and slot limits, the operations tpmsec prices and their samples.
#include "tpmsec/emulation/algtest_import.h"

#include <fmt/format.h>

#include <filesystem>

#include "algtest_files.h"

namespace tpmsec {
namespace algtest {
namespace {

namespace fs = std::filesystem;

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

// A property's 4 characters, from its raw value (big-endian; NULs and non-printable bytes dropped).
std::string chars_of(uint32_t raw) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) {
    char c = static_cast<char>((raw >> shift) & 0xff);
    if (c >= 0x20 && c <= 0x7e) s.push_back(c);  // printable ASCII only (profiles are JSON text)
  }
  return s;
}

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
      return usage_error(
          fmt::format("{}: performance.yaml: {} entry without avg/min/max op or successful", dir, e.section));
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
}  // namespace algtest

Result<AlgtestRun> read_algtest_run(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return usage_error(fmt::format("{}: not a directory", dir));
  fs::path root(dir);
  fs::path yaml = root / "performance.yaml";
  fs::path props_path = root / "detail" / "Capability_properties-fixed.txt";
  std::string yaml_text, props_text;
  if (!fs::is_regular_file(yaml, ec) || !algtest::read_text(yaml, &yaml_text)) {
    return usage_error(fmt::format("{}: no readable performance.yaml (not a tpm2-algtest result directory)", dir));
  }
  if (!fs::is_regular_file(props_path, ec) || !algtest::read_text(props_path, &props_text)) {
    return usage_error(fmt::format("{}: no readable detail/Capability_properties-fixed.txt", dir));
  }
  AlgtestRun run;
  run.dir = dir;
  run.label = algtest::label_of(dir);
  TPMSEC_RETURN_IF_ERROR(algtest::read_properties(props_text, dir, run));
  TPMSEC_RETURN_IF_ERROR(algtest::read_operations(yaml_text, dir, run));
  TPMSEC_RETURN_IF_ERROR(algtest::read_samples(root, run));
  return run;
}

}  // namespace tpmsec
