// Byte strings, hex, and secrets that wipe themselves.
#ifndef TPMSEC_BYTES_H_
#define TPMSEC_BYTES_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/result.h"

namespace tpmsec {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;
using MutableByteView = std::span<uint8_t>;

// Lowercase hex of `data`.
std::string to_hex(ByteView data);

// Parses hex (either case, even length, no separators; an optional 0x prefix).
Result<Bytes> from_hex(std::string_view hex);

inline ByteView as_bytes(std::string_view s) { return ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

inline Bytes concat(std::initializer_list<ByteView> parts) {
  Bytes out;
  for (ByteView p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Overwrites `data` with zeros in a way the compiler cannot elide.
void secure_wipe(void* data, size_t size);

// A byte string holding key material: wiped on destruction, move and clear.
// Copies are explicit (clone()) so secrets are not duplicated by accident.
class SecretBytes {
 public:
  SecretBytes() = default;
  explicit SecretBytes(ByteView data) : bytes_(data.begin(), data.end()) {}
  explicit SecretBytes(size_t size) : bytes_(size, 0) {}
  SecretBytes(SecretBytes&& other) noexcept : bytes_(std::move(other.bytes_)) { other.bytes_.clear(); }
  SecretBytes& operator=(SecretBytes&& other) noexcept {
    if (this != &other) {
      clear();
      bytes_ = std::move(other.bytes_);
      other.bytes_.clear();
    }
    return *this;
  }
  SecretBytes(const SecretBytes&) = delete;
  SecretBytes& operator=(const SecretBytes&) = delete;
  ~SecretBytes() { clear(); }

  SecretBytes clone() const { return SecretBytes(view()); }
  void clear() {
    if (!bytes_.empty()) secure_wipe(bytes_.data(), bytes_.size());
    bytes_.clear();
  }
  // Appends, wiping any buffer a reallocation leaves behind.
  void append(ByteView data);

  ByteView view() const { return bytes_; }
  MutableByteView mutable_view() { return bytes_; }
  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  void resize(size_t n);

 private:
  Bytes bytes_;
};

}  // namespace tpmsec

#endif  // TPMSEC_BYTES_H_
