// Big-endian TPM wire format: a bounds-checked reader and a writer that cannot write a size its bytes
// disagree with.
//   Reader  a cursor over untrusted bytes (borrowed: the caller keeps them alive). Every read can fail;
//           the first failure is recorded (what was expected, the field, the offset) and makes every later
//           read fail too, so a parser reads a whole structure and checks status() once. Values read
//           after a failure are zero and must not be used; counts and sizes that bound a loop go through
//           count()/tpm2b(), which refuse anything larger than the caller's limit.
//   Writer  builds a command or a part of one (owns its bytes). Every size or count it writes is checked
//           against what it counts, and the whole buffer against the limit given at construction
//           (kMaxCommandBytes for a command). The first failure is recorded and sticky: the buffer is
//           emptied and every later write does nothing; finish() takes the bytes or returns the error.
// Errors: a Reader's status() names the field and offset (kParse); a Writer's is kUsage (the caller's
// value does not fit) and names the field. Field names are string literals: a Writer keeps the views, not
// copies. Not thread-safe: one Reader or Writer per thread; they share no state.
// What a failed Writer guarantees, and the designs it follows (Linux's tpm_buf, BoringSSL's CBB):
// docs/architecture.md, "The wire format (include/tpmsec/wire.h)".
#ifndef TPMSEC_WIRE_H_
#define TPMSEC_WIRE_H_

#include <algorithm>
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
  static constexpr size_t kUnlimited = SIZE_MAX;

  // `limit` bounds the whole buffer; `what` names the buffer in that error.
  explicit Writer(size_t limit = kUnlimited, std::string_view what = "buffer") : limit_(limit), what_(what) {}

  void u8(uint8_t v);
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  // Bytes without a size prefix: a TPMT_HA digest, an area marshalled by
  // another Writer. `field` names them if they would pass the limit.
  void bytes(ByteView b, std::string_view field = "bytes");
  // A TPM2B: a u16 size, then the bytes. Refused when b is longer than max
  // (the spec's bound for the field) or than a u16 can say.
  void tpm2b(ByteView b, std::string_view field, size_t max = 0xffff);
  // A u32 list count (TPML_*), refused above max.
  void count(size_t n, std::string_view field, uint32_t max);
  // A u8 count (TPMS_PCR_SELECTION.sizeofSelect), refused above max.
  void count8(size_t n, std::string_view field, uint8_t max = 0xff);

  // A size field written before the body it counts: begin_size16/32() reserve
  // it, end_size() fills it in once the body is written, refusing a body over
  // max or over what the field can say. begin_total_size32() counts every byte
  // of the buffer, the field itself included (a command's commandSize).
  struct SizeMark {
    size_t pos = 0;    // where the size field is
    size_t from = 0;   // where the counted bytes start
    size_t width = 0;  // 2 or 4
    size_t max = 0;
    std::string_view field;
  };
  SizeMark begin_size16(std::string_view field, size_t max = 0xffff);
  SizeMark begin_size32(std::string_view field);
  SizeMark begin_total_size32(std::string_view field);
  void end_size(const SizeMark& mark);

  // Records a failure the caller found in its own value (e.g. a digest whose
  // length its algorithm contradicts). Only the first failure is kept.
  void fail(std::string message);

  bool ok() const { return !failed_; }
  Status status() const;
  // The bytes written, or the recorded error. Leaves the Writer empty.
  Result<Bytes> finish();

  // Room for n bytes in one allocation, when the caller knows the size (a
  // frame, an auth entry): the buffer otherwise grows as it is written.
  void reserve(size_t n) { buf_.reserve(std::min(n, limit_)); }

  size_t size() const { return buf_.size(); }
  // What has been written so far; empty once the Writer failed.
  const Bytes& data() const { return buf_; }

 private:
  // True when n more bytes fit under the limit; fails the Writer otherwise.
  bool room(size_t n, std::string_view field);
  void put(const uint8_t* p, size_t n) {
    if (buf_.capacity() - buf_.size() < n) grow(n);
    buf_.insert(buf_.end(), p, p + n);
  }
  // At least kFirstCapacity at the first write, then doubling: a command's
  // parameters (tens of bytes) take one allocation, not one per field.
  static constexpr size_t kFirstCapacity = 64;
  void grow(size_t n);
  void put16(uint16_t v);
  void put32(uint32_t v);

  Bytes buf_;
  size_t limit_;
  std::string_view what_;
  bool failed_ = false;
  std::string error_;
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
