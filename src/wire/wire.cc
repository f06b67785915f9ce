#include <fmt/format.h>

#include "tpmsec/wire.h"

namespace tpmsec {

bool Reader::take(size_t n, std::string_view field, const uint8_t** out) {
  if (failed_) return false;
  if (data_.size() - pos_ < n) {
    fail(fmt::format("truncated {}: expected {} byte{} at offset {}, have {}", field, n, n == 1 ? "" : "s",
                     offset(), data_.size() - pos_));
    return false;
  }
  *out = data_.data() + pos_;
  pos_ += n;
  return true;
}

uint8_t Reader::u8(std::string_view field) {
  const uint8_t* p;
  return take(1, field, &p) ? p[0] : 0;
}

uint16_t Reader::u16(std::string_view field) {
  const uint8_t* p;
  return take(2, field, &p) ? static_cast<uint16_t>(p[0] << 8 | p[1]) : 0;
}

uint32_t Reader::u32(std::string_view field) {
  const uint8_t* p;
  return take(4, field, &p) ? load_be32(p) : 0;
}

uint64_t Reader::u64(std::string_view field) {
  const uint8_t* p;
  if (!take(8, field, &p)) return 0;
  return uint64_t{load_be32(p)} << 32 | load_be32(p + 4);
}

ByteView Reader::bytes(size_t n, std::string_view field) {
  const uint8_t* p;
  return take(n, field, &p) ? ByteView(p, n) : ByteView();
}

ByteView Reader::tpm2b(std::string_view field, size_t max) {
  size_t at = offset();
  uint16_t size = u16(field);
  if (failed_) return {};
  if (size > max) {
    fail(fmt::format("{} at offset {} has size {}, at most {} allowed", field, at, size, max));
    return {};
  }
  return bytes(size, field);
}

uint32_t Reader::count(std::string_view field, uint32_t max) {
  size_t at = offset();
  uint32_t n = u32(field);
  if (failed_) return 0;
  if (n > max) {
    fail(fmt::format("{} at offset {} has count {}, at most {} allowed", field, at, n, max));
    return 0;
  }
  return n;
}

Reader Reader::sub(size_t n, std::string_view field) {
  size_t at = offset();
  ByteView b = bytes(n, field);
  Reader r(b, at);
  if (failed_) r.fail(error_);
  return r;
}

Reader Reader::sized(std::string_view field, size_t max) {
  size_t at = offset();
  uint16_t size = u16(field);
  if (!failed_ && size > max) {
    fail(fmt::format("{} at offset {} has size {}, at most {} allowed", field, at, size, max));
  }
  return sub(failed_ ? 0 : size, field);
}

void Reader::fail(std::string message) {
  if (failed_) return;
  failed_ = true;
  error_ = std::move(message);
}

void Reader::expect_end(std::string_view what) {
  if (!failed_ && pos_ != data_.size()) {
    fail(fmt::format("{} has {} unexpected trailing byte{} at offset {}", what, data_.size() - pos_,
                     data_.size() - pos_ == 1 ? "" : "s", offset()));
  }
}

Status Reader::status() const {
  if (!failed_) return ok_status();
  return parse_error(error_);
}

void Reader::absorb(const Reader& inner) {
  if (!inner.ok()) fail(inner.error_);
}

void Writer::u16(uint16_t v) {
  buf_.push_back(static_cast<uint8_t>(v >> 8));
  buf_.push_back(static_cast<uint8_t>(v));
}

void Writer::u32(uint32_t v) {
  uint8_t b[4];
  store_be32(b, v);
  bytes(b);
}

void Writer::u64(uint64_t v) {
  u32(static_cast<uint32_t>(v >> 32));
  u32(static_cast<uint32_t>(v));
}

void Writer::tpm2b(ByteView b) {
  u16(static_cast<uint16_t>(b.size()));
  bytes(b);
}

size_t Writer::begin_size16() {
  size_t mark = buf_.size();
  u16(0);
  return mark;
}

void Writer::end_size16(size_t mark) {
  size_t n = buf_.size() - mark - 2;
  buf_[mark] = static_cast<uint8_t>(n >> 8);
  buf_[mark + 1] = static_cast<uint8_t>(n);
}

size_t Writer::begin_size32() {
  size_t mark = buf_.size();
  u32(0);
  return mark;
}

void Writer::end_size32(size_t mark) { store_be32(buf_.data() + mark, static_cast<uint32_t>(buf_.size() - mark - 4)); }

}  // namespace tpmsec
