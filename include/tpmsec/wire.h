// Big-endian TPM wire format: a bounds-checked reader and a growable writer.
//
// Reader is a cursor over untrusted bytes. Every read can fail; the first
// failure is recorded (what was expected, the field, and the offset) and makes
// every later read fail too, so a parser may read a whole structure and check
// status() once. Values read after a failure are zero and must not be used;
// counts and sizes that bound a loop go through count()/tpm2b(), which refuse
// anything larger than the caller's limit.
#ifndef TPMSEC_WIRE_H_
#define TPMSEC_WIRE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec {

class Reader {
 public:
  explicit Reader(ByteView data, size_t base_offset = 0) : data_(data), base_(base_offset) {}

  uint8_t u8(std::string_view field);
  uint16_t u16(std::string_view field);
  uint32_t u32(std::string_view field);
  uint64_t u64(std::string_view field);
  // The next n bytes.
  ByteView bytes(size_t n, std::string_view field);
  // A TPM2B: a u16 size, then that many bytes; the size may not exceed max.
  ByteView tpm2b(std::string_view field, size_t max = 0xffff);
  // A u32 list count, refused when above max.
  uint32_t count(std::string_view field, uint32_t max);
  // A reader over the next n bytes (advances this one past them).
  Reader sub(size_t n, std::string_view field);
  // A reader over a u16-sized body (TPM2B of a structure).
  Reader sized(std::string_view field, size_t max = 0xffff);

  // Records a semantic failure (e.g. an unknown algorithm id) at the cursor.
  void fail(std::string message);
  // Fails unless every byte was consumed.
  void expect_end(std::string_view what);

  bool ok() const { return !failed_; }
  Status status() const;
  // Propagates a nested reader's failure into this one.
  void absorb(const Reader& inner);

  size_t remaining() const { return failed_ ? 0 : data_.size() - pos_; }
  size_t offset() const { return base_ + pos_; }
  ByteView rest() const { return failed_ ? ByteView() : data_.subspan(pos_); }

 private:
  bool take(size_t n, std::string_view field, const uint8_t** out);

  ByteView data_;
  size_t base_;
  size_t pos_ = 0;
  bool failed_ = false;
  std::string error_;
};

class Writer {
 public:
  Writer() = default;

  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void bytes(ByteView b) { buf_.insert(buf_.end(), b.begin(), b.end()); }
  // u16 size then the bytes. Callers keep b below 64 KiB (TPM buffers are 4 KiB).
  void tpm2b(ByteView b);

  // Reserves a u16 (or u32) size field to be patched by end_size*() once the
  // body is written: returns the position to pass back.
  size_t begin_size16();
  void end_size16(size_t mark);
  size_t begin_size32();
  void end_size32(size_t mark);

  size_t size() const { return buf_.size(); }
  const Bytes& data() const { return buf_; }
  Bytes take() { return std::move(buf_); }
  uint8_t* at(size_t pos) { return buf_.data() + pos; }

 private:
  Bytes buf_;
};

// Big-endian helpers for fixed buffers.
inline void store_be32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline uint32_t load_be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline Bytes be32(uint32_t v) {
  Bytes b(4);
  store_be32(b.data(), v);
  return b;
}

}  // namespace tpmsec

#endif  // TPMSEC_WIRE_H_
