#include "tpmsec/bytes.h"

#include <openssl/crypto.h>

#include <algorithm>

namespace tpmsec {

std::string to_hex(ByteView data) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(data.size() * 2);
  for (uint8_t b : data) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<Bytes> from_hex(std::string_view hex) {
  if (hex.size() >= 2 && hex[0] == '0' && (hex[1] == 'x' || hex[1] == 'X')) hex.remove_prefix(2);
  if (hex.size() % 2 != 0) {
    return usage_error("hex string has an odd number of digits (" + std::to_string(hex.size()) + ")");
  }
  Bytes out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return usage_error("invalid hex digit at position " + std::to_string(2 * i + (hi < 0 ? 0 : 1)));
    }
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

void secure_wipe(void* data, size_t size) { OPENSSL_cleanse(data, size); }

void SecretBytes::append(ByteView data) {
  // Build in a new buffer (data may be a view of this one), then wipe the old.
  Bytes bigger;
  bigger.reserve(std::max(bytes_.capacity(), bytes_.size() + data.size()));
  bigger.assign(bytes_.begin(), bytes_.end());
  bigger.insert(bigger.end(), data.begin(), data.end());
  clear();
  bytes_ = std::move(bigger);
}

void SecretBytes::resize(size_t n) {
  if (n > bytes_.capacity()) {
    Bytes bigger;
    bigger.reserve(n);
    bigger.assign(bytes_.begin(), bytes_.end());
    clear();
    bytes_ = std::move(bigger);
  } else if (n < bytes_.size()) {
    secure_wipe(bytes_.data() + n, bytes_.size() - n);
  }
  bytes_.resize(n, 0);
}

}  // namespace tpmsec
