#include "resource_manager/handle_listing.h"

#include <algorithm>

#include "resource_manager/tpm_calls.h"
#include "tpmsec/constants.h"
#include "tpmsec/frame_fields.h"
#include "tpmsec/frame_header.h"
#include "tpmsec/response_code.h"
#include "tpmsec/response_frame.h"
#include "tpmsec/wire.h"

namespace tpmsec::server {
namespace {
constexpr uint32_t kMaxCapHandles = 254;  // MAX_CAP_HANDLES for a 1024-byte capability buffer (Part 2 §10.10)
}  // namespace

std::optional<Bytes> list_handles_of_space(ByteView parameters, bool has_sessions,
                                           const std::function<SpaceListing()>& space) {
  Reader r(parameters);
  (void)r.u32("capability");
  const uint32_t property = r.u32("property");
  const uint32_t count = r.u32("propertyCount");
  if (!r.ok() || !asks_own_handles(parameters)) return std::nullopt;
  const uint8_t type = static_cast<uint8_t>(property >> 24);
  if (has_sessions) return error_frame(rc_parameter(rc::kValue, 0));

  SpaceListing listing = space();
  std::vector<uint32_t>& pool = type == ht::kTransient     ? listing.objects
                                : type == ht::kHmacSession ? listing.loaded_sessions
                                                           : listing.saved_sessions;
  // In the TPM's order: by handle index, from `property` on.
  auto index = [](uint32_t h) { return h & 0x00FFFFFF; };
  std::sort(pool.begin(), pool.end(), [&](uint32_t a, uint32_t b) { return index(a) < index(b); });
  std::vector<uint32_t> out;
  for (uint32_t h : pool) {
    if (index(h) >= index(property)) out.push_back(h);
  }
  const size_t limit = std::min<uint32_t>(count, kMaxCapHandles);
  const bool more = out.size() > limit;
  if (more) out.resize(limit);

  auto listed = write_handle_listing(HandleListing{static_cast<uint8_t>(more ? 1 : 0), std::move(out)});
  if (!listed.ok()) return error_frame(rc::kFailure);
  auto response = write_response_frame(rc::kSuccess, {}, *listed, {}, kMaxCommandBytes);
  if (!response.ok()) return error_frame(rc::kFailure);
  return std::move(*response);
}

}  // namespace tpmsec::server
