#include "emulator_server/identity_rewrite.h"

#include <optional>

#include "tpmsec/command_frame.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/structures.h"

namespace tpmsec::emulation {
namespace {

// The profile's value of `property`, for the ones that name the chip.
std::optional<uint32_t> profile_value(uint32_t property, const TpmInfo& identity) {
  if (property == pt::kManufacturer) return identity.manufacturer_raw;
  if (property >= pt::kVendorString1 && property <= pt::kVendorString4) {
    return identity.vendor_raw[property - pt::kVendorString1];
  }
  if (property == pt::kFirmwareVersion1) return identity.firmware_version_1;
  if (property == pt::kFirmwareVersion2) return identity.firmware_version_2;
  return std::nullopt;
}

}  // namespace

void rewrite_identity(Bytes& response, ByteView command, const TpmInfo& identity) {
  // Read and written by the frame codec: a command in a session, another
  // command or capability, or an answer that does not parse is left alone.
  auto asked = read_command_areas(command, kMaxCommandBytes);
  if (!asked.ok() || asked->info->code != cmd::GetCapability::kInfo.code || !asked->sessions.empty()) return;
  auto answer = read_response_areas(response, 0, response.size());
  if (!answer.ok() || answer->header.code != rc::kSuccess || !answer->sessions.empty()) return;
  Reader r(answer->parameters);
  cmd::GetCapability::Response got;
  unmarshal_all(r, got.params());
  r.expect_end("GetCapability response");
  if (!r.ok() || got.capability_data.capability != cap::kTpmProperties) return;
  for (TaggedProperty& p : got.capability_data.properties) {
    if (std::optional<uint32_t> value = profile_value(p.property, identity)) p.value = *value;
  }
  Writer w;
  marshal_all(w, got.params());
  auto parameters = w.finish();
  if (!parameters.ok()) return;
  auto rewritten = write_response_frame(rc::kSuccess, {}, *parameters, {}, response.size());
  if (rewritten.ok()) response = std::move(*rewritten);
}

}  // namespace tpmsec::emulation
