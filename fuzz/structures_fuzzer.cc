// Unmarshals every structure of structures.h from the input. Whenever one
// parses, marshalling it again must reproduce exactly the bytes consumed, and
// unmarshal_exact must agree with the Reader about trailing bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "tpmsec/bytes.h"
#include "tpmsec/structures.h"
#include "tpmsec/wire.h"

namespace {

using namespace tpmsec;

[[noreturn]] void die(const char* type, const char* what, ByteView data) {
  std::fprintf(stderr, "structures_fuzzer: %s: %s\ninput: %s\n", type, what, to_hex(data).c_str());
  std::abort();
}

template <class T>
void check(ByteView data, const char* name) {
  Reader r(data);
  T value{};
  unmarshal(r, value);
  auto exact = unmarshal_exact<T>(data, name);
  if (!r.ok()) {
    if (r.remaining() != 0 || !r.rest().empty()) die(name, "failed reader still offers bytes", data);
    if (exact.ok()) die(name, "unmarshal_exact accepted what the reader refused", data);
    return;
  }
  size_t consumed = data.size() - r.remaining();
  auto marshalled = marshal_to_bytes(value);
  if (!marshalled.ok()) {
    std::fprintf(stderr, "marshal: %s\n", marshalled.error().message().c_str());
    die(name, "a value unmarshal accepted does not marshal", data);
  }
  const Bytes& again = *marshalled;
  if (again.size() != consumed || !std::equal(again.begin(), again.end(), data.begin())) {
    std::fprintf(stderr, "re-marshalled: %s\n", to_hex(again).c_str());
    die(name, "re-marshal differs from the bytes consumed", data);
  }
  if (exact.ok() != (consumed == data.size())) die(name, "unmarshal_exact disagrees about trailing bytes", data);
  if (exact.ok() && !(*exact == value)) die(name, "unmarshal_exact parsed a different value", data);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  ByteView data(bytes, size);
  check<PcrSelection>(data, "PcrSelection");
  check<PcrSelectionList>(data, "PcrSelectionList");
  check<DigestList>(data, "DigestList");
  check<TaggedHash>(data, "TaggedHash");
  check<DigestValues>(data, "DigestValues");
  check<SymDef>(data, "SymDef");
  check<Public>(data, "Public");
  check<PublicArea>(data, "PublicArea");
  check<SensitiveCreate>(data, "SensitiveCreate");
  check<Ticket>(data, "Ticket");
  check<Context>(data, "Context");
  check<CapabilityData>(data, "CapabilityData");
  check<Tpm2bDigest>(data, "Tpm2bDigest");
  check<Tpm2bName>(data, "Tpm2bName");
  check<Tpm2bEncryptedSecret>(data, "Tpm2bEncryptedSecret");
  check<Tpm2bContextData>(data, "Tpm2bContextData");
  check<Tpm2bPrivate>(data, "Tpm2bPrivate");
  return 0;
}
