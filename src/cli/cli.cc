#include "cli.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tpmsec/constants.h"

namespace tpmsec::cli {

int exit_code_for(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::kUsage: return kExitUsage;
    case ErrorKind::kIntegrity: return kExitIntegrity;
    default: return kExitRuntime;
  }
}

void TpmOption::add_to(CLI::App* sub) {
  spec = default_transport_spec();
  sub->add_option("--tpm", spec,
                  "TPM to use (tpm2-tss TCTI syntax): embedded[:state=DIR], swtpm:host=H,port=P[,ctrl=P2], "
                  "swtpm:path=SOCKET, device:/dev/tpmrm0. Default: $TPMSEC_TPM or embedded")
      ->capture_default_str();
  sub->add_option("--emulate", emulate,
                  "Put the TPM behind the latency model of a profile (data/profiles/NAME.json or a path; see "
                  "tpmsec profiles) on a virtual clock: it reports that TPM's identity and timing");
}

OpenTpm::~OpenTpm() {
  if (!measured || measured->profile.empty() || measured->log.size() == 0) return;
  int64_t ns = 0;
  for (const TraceRecord& r : measured->log.records()) ns += r.duration_ns;
  fmt::print(stderr, "tpmsec: emulated {}: {} TPM commands took {:.2f} ms on the virtual clock\n", measured->profile,
             measured->log.size(), static_cast<double>(ns) / 1e6);
}

Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const TpmOption& option) {
  TPMSEC_ASSIGN_OR_RETURN(auto m, tpmsec::open_measured_tpm(option.spec, option.emulate));
  if (!m->warning.empty()) fmt::print(stderr, "tpmsec: warning: {}\n", m->warning);
  return m;
}

Result<OpenTpm> open_tpm(const TpmOption& option) {
  OpenTpm out;
  TPMSEC_ASSIGN_OR_RETURN(out.measured, open_measured_tpm(option));
  return out;
}

Status write_file(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return runtime_error(fmt::format("cannot write {}", path));
    out << content;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return runtime_error(fmt::format("cannot write {}", path));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return runtime_error(fmt::format("cannot write {}", path));
  }
  return ok_status();
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return usage_error(fmt::format("{}: no such file", path));
  if (!std::filesystem::is_regular_file(path, ec)) return usage_error(fmt::format("{}: not a regular file", path));
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return usage_error(fmt::format("cannot read {}", path));
  if (size > max_bytes) return usage_error(fmt::format("{}: larger than {} bytes", path, max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return usage_error(fmt::format("cannot read {}", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return usage_error(fmt::format("cannot read {}", path));
  return text.str();
}

Result<nlohmann::json> read_json_file(const std::string& path) {
  TPMSEC_ASSIGN_OR_RETURN(std::string text, read_file(path, size_t{256} << 20));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return usage_error(fmt::format("{}: not valid JSON", path));
  return j;
}

Result<uint32_t> parse_pcr_index(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos) {
    return usage_error(fmt::format("PCR index must be a decimal number, got '{}'", text));
  }
  return static_cast<uint32_t>(std::stoul(text));
}

Result<uint16_t> parse_bank(const std::string& text) {
  auto bank = hash_from_name(text);
  if (!bank) return usage_error(fmt::format("unknown PCR bank '{}' (expected sha1, sha256, sha384 or sha512)", text));
  return *bank;
}

}  // namespace tpmsec::cli
