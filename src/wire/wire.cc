#include <fmt/format.h>

#include <algorithm>

#include "tpmsec/wire.h"

namespace tpmsec {

bool Reader::take(size_t n, std::string_view field, const uint8_t** out) {
  if (failed_) return false;
  if (data_.size() - pos_ < n) {
    fail(fmt::format("truncated {}: expected {} byte{} at offset {}, have {}", field, n, n == 1 ? "" : "s", offset(),
                     data_.size() - pos_));
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

bool Writer::room(size_t n, std::string_view field) {
  if (failed_) return false;
  if (n > limit_ - buf_.size()) {  // buf_ never grows past limit_
    fail(fmt::format("{} would be {} bytes writing {} at offset {}, at most {} allowed", what_, buf_.size() + n, field,
                     buf_.size(), limit_));
    return false;
  }
  return true;
}

void Writer::grow(size_t n) { buf_.reserve(std::max({buf_.size() + n, 2 * buf_.capacity(), kFirstCapacity})); }

void Writer::put16(uint16_t v) {
  uint8_t b[2] = {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
  put(b, 2);
}

void Writer::put32(uint32_t v) {
  uint8_t b[4];
  store_be32(b, v);
  put(b, 4);
}

void Writer::u8(uint8_t v) {
  if (room(1, "UINT8")) put(&v, 1);
}

void Writer::u16(uint16_t v) {
  if (room(2, "UINT16")) put16(v);
}

void Writer::u32(uint32_t v) {
  if (room(4, "UINT32")) put32(v);
}

void Writer::u64(uint64_t v) {
  if (!room(8, "UINT64")) return;
  put32(static_cast<uint32_t>(v >> 32));
  put32(static_cast<uint32_t>(v));
}

void Writer::bytes(ByteView b, std::string_view field) {
  if (room(b.size(), field)) put(b.data(), b.size());
}

void Writer::tpm2b(ByteView b, std::string_view field, size_t max) {
  if (failed_) return;
  size_t limit = std::min<size_t>(max, 0xffff);
  if (b.size() > limit) {
    return fail(fmt::format("{} at offset {} has size {}, at most {} allowed", field, buf_.size(), b.size(), limit));
  }
  if (!room(2 + b.size(), field)) return;
  put16(static_cast<uint16_t>(b.size()));
  put(b.data(), b.size());
}

void Writer::count(size_t n, std::string_view field, uint32_t max) {
  if (failed_) return;
  if (n > max) return fail(fmt::format("{} at offset {} has count {}, at most {} allowed", field, buf_.size(), n, max));
  if (room(4, field)) put32(static_cast<uint32_t>(n));
}

void Writer::count8(size_t n, std::string_view field, uint8_t max) {
  if (failed_) return;
  if (n > max) return fail(fmt::format("{} at offset {} has count {}, at most {} allowed", field, buf_.size(), n, max));
  uint8_t v = static_cast<uint8_t>(n);
  if (room(1, field)) put(&v, 1);
}

Writer::SizeMark Writer::begin_size16(std::string_view field, size_t max) {
  SizeMark mark{buf_.size(), buf_.size() + 2, 2, std::min<size_t>(max, 0xffff), field};
  if (room(2, field)) put16(0);
  return mark;
}

Writer::SizeMark Writer::begin_size32(std::string_view field) {
  SizeMark mark{buf_.size(), buf_.size() + 4, 4, 0xffffffff, field};
  if (room(4, field)) put32(0);
  return mark;
}

Writer::SizeMark Writer::begin_total_size32(std::string_view field) {
  SizeMark mark{buf_.size(), 0, 4, 0xffffffff, field};
  if (room(4, field)) put32(0);
  return mark;
}

void Writer::end_size(const SizeMark& mark) {
  if (failed_) return;
  size_t n = buf_.size() - mark.from;
  if (n > mark.max) {
    return fail(fmt::format("{} at offset {} has size {}, at most {} allowed", mark.field, mark.pos, n, mark.max));
  }
  if (mark.width == 2) {
    buf_[mark.pos] = static_cast<uint8_t>(n >> 8);
    buf_[mark.pos + 1] = static_cast<uint8_t>(n);
  } else {
    store_be32(buf_.data() + mark.pos, static_cast<uint32_t>(n));
  }
}

void Writer::fail(std::string message) {
  if (failed_) return;
  failed_ = true;
  error_ = std::move(message);
  Bytes().swap(buf_);
}

Status Writer::status() const {
  if (!failed_) return ok_status();
  return usage_error(error_);
}

Result<Bytes> Writer::finish() {
  if (failed_) return usage_error(error_);
  return std::move(buf_);
}

}  // namespace tpmsec
