#include "tpmsec/tpm_id.h"

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/text.h"

namespace tpmsec {

namespace {

std::string key_of(std::string_view text) {
  auto digest = crypto::hash(alg::kSha256, {as_bytes(text)});
  return digest.ok() ? to_hex(ByteView(*digest).first(16)) : "unknown";
}

}  // namespace

TpmId TpmId::of(std::string text) {
  std::string key = key_of(text);
  return TpmId{std::move(text), std::move(key)};
}

ProgramId ProgramId::of(std::string path) {
  std::string key = key_of(path);
  return ProgramId{std::move(path), std::move(key)};
}

}  // namespace tpmsec
