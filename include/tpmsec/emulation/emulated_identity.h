// The identity an emulated TPM presents: the latency profile's manufacturer,
// vendor strings and firmware (latency_profile.h) over the real TPM's
// capabilities, always marked emulated, with the real identity kept for
// honesty; and the encoding of those strings as TPM property values.
#ifndef TPMSEC_EMULATION_EMULATED_IDENTITY_H_
#define TPMSEC_EMULATION_EMULATED_IDENTITY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tpmsec/emulation/latency_profile.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {

// What an emulated TPM reports: the profile's manufacturer, vendor strings
// and firmware over the real TPM's capabilities (PCR banks, algorithms,
// slots), marked emulated, with the real identity kept for honesty.
struct EmulatedIdentity {
  TpmInfo info;
  bool emulated = true;
  std::string profile;       // profile id
  std::string profile_name;  // profile display name
  std::string bus;           // the profile's bus
  std::string real_manufacturer;
  std::string real_vendor;
  std::string real_firmware;
};
EmulatedIdentity emulated_info(const LatencyProfile& profile, const TpmInfo& real);

// to_json(TpmInfo) plus "emulated": true, "profile", "profile_name", "bus"
// and "real": {manufacturer, vendor, firmware_version}.
nlohmann::json to_json(const EmulatedIdentity& identity);
// to_text(TpmInfo) plus the emulation lines.
std::string to_text(const EmulatedIdentity& identity);

// Four characters as a TPM property value ("IFX" -> 0x49465800): big-endian,
// NUL-padded (at most 4 bytes are used).
uint32_t property_value(std::string_view text);
// "7.85" -> 0x00070055; 0 for empty or unparsable text.
uint32_t firmware_value(std::string_view text);

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_EMULATED_IDENTITY_H_
