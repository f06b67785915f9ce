#include "tpmsec/constants.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "tpmsec/text.h"

namespace tpmsec {

std::optional<uint16_t> digest_size(uint16_t hash_alg) {
  switch (hash_alg) {
    case alg::kSha1:
      return 20;
    case alg::kSha256:
      return 32;
    case alg::kSha384:
      return 48;
    case alg::kSha512:
      return 64;
    case alg::kSm3_256:
      return 32;
    default:
      return std::nullopt;
  }
}

std::string_view hash_name(uint16_t hash_alg) {
  switch (hash_alg) {
    case alg::kSha1:
      return "sha1";
    case alg::kSha256:
      return "sha256";
    case alg::kSha384:
      return "sha384";
    case alg::kSha512:
      return "sha512";
    case alg::kSm3_256:
      return "sm3_256";
    default:
      return "unknown";
  }
}

std::optional<uint16_t> hash_from_name(std::string_view name) {
  const std::string lower = ascii_lower(name);
  for (uint16_t a : {alg::kSha1, alg::kSha256, alg::kSha384, alg::kSha512, alg::kSm3_256}) {
    if (hash_name(a) == lower) return a;
  }
  return std::nullopt;
}

}  // namespace tpmsec
