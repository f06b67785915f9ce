#include "tpmsec/tpm_id.h"

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/text.h"

namespace tpmsec {

TpmId TpmId::of(std::string text) {
  auto digest = crypto::hash(alg::kSha256, {as_bytes(std::string_view(text))});
  std::string key = digest.ok() ? to_hex(ByteView(*digest).first(16)) : "unknown";
  return TpmId{std::move(text), std::move(key)};
}

}  // namespace tpmsec
