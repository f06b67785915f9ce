// The identity an emulated TPM presents: the profile's part over the real
// TPM's capabilities, always marked emulated.
#include <fmt/format.h>

#include <charconv>

#include "tpmsec/emulation/emulated_identity.h"
#include "tpmsec/emulation/tpm_info_json.h"

namespace tpmsec {

uint32_t property_value(std::string_view text) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) {
    uint8_t byte = i < text.size() ? static_cast<uint8_t>(text[i]) : 0;
    v = v << 8 | byte;
  }
  return v;
}

uint32_t firmware_value(std::string_view text) {
  size_t dot = text.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= text.size()) return 0;
  uint32_t major = 0, minor = 0;
  auto a = std::from_chars(text.data(), text.data() + dot, major);
  auto b = std::from_chars(text.data() + dot + 1, text.data() + text.size(), minor);
  if (a.ec != std::errc() || a.ptr != text.data() + dot || b.ec != std::errc() || b.ptr != text.data() + text.size() ||
      major > 0xffff || minor > 0xffff) {
    return 0;
  }
  return major << 16 | minor;
}

EmulatedIdentity emulated_info(const LatencyProfile& profile, const TpmInfo& real) {
  EmulatedIdentity e;
  e.info = real;
  e.profile = profile.id;
  e.profile_name = profile.name;
  e.bus = profile.identity.bus;
  e.real_manufacturer = real.manufacturer;
  e.real_vendor = real.vendor();
  e.real_firmware = real.firmware_version();

  const ProfileIdentity& id = profile.identity;
  e.info.manufacturer_raw = property_value(id.manufacturer);
  e.info.manufacturer = property_text(e.info.manufacturer_raw);
  for (size_t i = 0; i < 4; ++i) {
    e.info.vendor_raw[i] = property_value(id.vendor_strings[i]);
    e.info.vendor_strings[i] = property_text(e.info.vendor_raw[i]);
  }
  e.info.firmware_version_1 = firmware_value(id.firmware);  // 0.0 when the profile does not know it
  e.info.firmware_version_2 = 0;
  return e;
}

nlohmann::json to_json(const EmulatedIdentity& e) {
  nlohmann::json j = to_json(e.info);
  j["emulated"] = e.emulated;
  j["profile"] = e.profile;
  j["profile_name"] = e.profile_name;
  j["bus"] = e.bus;
  j["real"] = {{"manufacturer", e.real_manufacturer}, {"vendor", e.real_vendor}, {"firmware_version", e.real_firmware}};
  return j;
}

std::string to_text(const EmulatedIdentity& e) {
  std::string out = to_text(e.info);
  out +=
      fmt::format("{:<24}{}\n", "emulated", fmt::format("yes: profile {} ({}, {})", e.profile, e.profile_name, e.bus));
  out += fmt::format("{:<24}{}\n", "real TPM",
                     fmt::format("\"{}\" \"{}\" firmware {}", e.real_manufacturer, e.real_vendor, e.real_firmware));
  return out;
}

}  // namespace tpmsec
