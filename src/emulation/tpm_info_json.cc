// TpmInfo as the JSON object of docs/info-json.md. Kept out of src/tpm (in emulation, the lowest layer with
// nlohmann-json) so the core layer does not depend on nlohmann-json (docs/architecture.md).
#include "tpmsec/emulation/tpm_info_json.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace tpmsec {

nlohmann::json to_json(const TpmInfo& info) {
  using nlohmann::json;
  json banks = json::array();
  for (const auto& b : info.pcr_banks) banks.push_back({{"hash", hash_name(b.hash)}, {"pcrs", b.pcrs.size()}});
  return json{
      {"manufacturer", info.manufacturer},
      {"manufacturer_raw", fmt::format("0x{:08X}", info.manufacturer_raw)},
      {"vendor", info.vendor()},
      {"vendor_strings", json(std::vector<std::string>(info.vendor_strings.begin(), info.vendor_strings.end()))},
      {"firmware_version", info.firmware_version()},
      {"firmware_version_raw",
       {fmt::format("0x{:08X}", info.firmware_version_1), fmt::format("0x{:08X}", info.firmware_version_2)}},
      {"spec",
       {{"family", info.spec_family},
        {"level", info.spec_level},
        {"revision", fmt::format("{}.{:02}", info.spec_revision / 100, info.spec_revision % 100)},
        {"day_of_year", info.spec_day_of_year},
        {"year", info.spec_year}}},
      {"tpm_type", info.tpm_type},
      {"pcr_count", info.pcr_count},
      {"pcr_banks", banks},
      {"ecc_p256", info.ecc_p256},
      {"rsa_2048", info.rsa_2048},
      {"max_loaded_sessions", info.max_loaded_sessions},
      {"max_active_sessions", info.max_active_sessions},
      {"max_transient_objects", info.max_transient_objects},
      {"max_context_size", std::max(info.max_object_context, info.max_session_context)},
      {"max_object_context", info.max_object_context},
      {"max_session_context", info.max_session_context},
  };
}

}  // namespace tpmsec
