// Little-endian reads on the bounds-checked Reader, for the Linux and UEFI
// logs (the TPM wire format itself is big-endian: wire.h).
#ifndef TPMSEC_SRC_REPLAY_LITTLE_ENDIAN_H_
#define TPMSEC_SRC_REPLAY_LITTLE_ENDIAN_H_

#include <cstdint>
#include <string_view>

#include "tpmsec/wire.h"

namespace tpmsec::replay_internal {

// 0 once the reader has failed, as Reader's own reads.
inline uint16_t read_le16(Reader& r, std::string_view field) {
  ByteView b = r.bytes(2, field);
  return b.size() == 2 ? static_cast<uint16_t>(b[0] | b[1] << 8) : 0;
}

inline uint32_t read_le32(Reader& r, std::string_view field) {
  ByteView b = r.bytes(4, field);
  return b.size() == 4 ? uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24 : 0;
}

inline void append_le32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace tpmsec::replay_internal

#endif  // TPMSEC_SRC_REPLAY_LITTLE_ENDIAN_H_
