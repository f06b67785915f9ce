#include "emulation/server/identity_rewrite.h"

#include <optional>

#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/wire.h"

namespace tpmsec::emulation {
namespace {
// GetCapability's response: header, moreData (1), capability (4), count (4), then (property, value) pairs.
constexpr size_t kCapabilityAt = kFrameHeaderBytes + 1;
constexpr size_t kCountAt = kCapabilityAt + 4;
constexpr size_t kPropertiesAt = kCountAt + 4;
}  // namespace

void rewrite_identity(Bytes& response, ByteView command, const TpmInfo& identity) {
  HeaderRead c = read_frame_header(command, kMaxCommandBytes);
  HeaderRead r = read_frame_header(response, response.size());
  if (c.check != FrameCheck::kOk || c.header.tag != st::kNoSessions ||
      c.header.code != cmd::GetCapability::kInfo.code || command.size() < kFrameHeaderBytes + 4 ||
      r.check != FrameCheck::kOk || r.header.tag != st::kNoSessions || r.header.code != rc::kSuccess ||
      response.size() < kPropertiesAt || load_be32(response.data() + kCapabilityAt) != cap::kTpmProperties) {
    return;
  }
  uint32_t count = load_be32(response.data() + kCountAt);
  size_t at = kPropertiesAt;
  for (uint32_t i = 0; i < count && at + 8 <= response.size(); ++i, at += 8) {
    uint32_t property = load_be32(response.data() + at);
    std::optional<uint32_t> value;
    if (property == pt::kManufacturer) value = identity.manufacturer_raw;
    if (property >= pt::kVendorString1 && property <= pt::kVendorString4) {
      value = identity.vendor_raw[property - pt::kVendorString1];
    }
    if (property == pt::kFirmwareVersion1) value = identity.firmware_version_1;
    if (property == pt::kFirmwareVersion2) value = identity.firmware_version_2;
    if (value) store_be32(response.data() + at + 4, *value);
  }
}

}  // namespace tpmsec::emulation
