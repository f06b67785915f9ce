// A protected PCR extend on the embedded TPM (in-process libtpms) through the
// public API, the way `tpmsec pcr extend --strategy per-command` does it:
// open a transport, read the TPM's capabilities, open an ExtendStream whose
// sessions are salted to the null key, extend, finish, and read the PCR back.
// Build: see examples/CMakeLists.txt (find_package) or examples/Makefile (pkg-config).
#include <cstdio>
#include <memory>

#include "tpmsec/bytes.h"
#include "tpmsec/pcr.h"
#include "tpmsec/strategy.h"
#include "tpmsec/tpm.h"
#include "tpmsec/tpm_info.h"
#include "tpmsec/transport.h"

namespace {

int fail(const char* what, const tpmsec::Error& e) {
  std::fprintf(stderr, "protected_extend: %s: %s\n", what, e.message().c_str());
  return 1;
}

}  // namespace

int main() {
  using namespace tpmsec;
  auto transport = open_transport("embedded");
  if (!transport.ok()) return fail("open", transport.error());
  Tpm tpm(*transport.value());
  auto info = read_tpm_info(tpm);
  if (!info.ok()) return fail("info", info.error());

  StreamOptions options;
  options.pcr = 16;
  options.bank = alg::kSha256;
  options.one_shot = true;
  // The embedded TPM is in this process: no bus, so no salt-key anchor is
  // needed. A TPM behind a bus needs one (ProtectionConfig, docs/threat-model.md).
  auto stream = ExtendStream::open(tpm, StrategyKind::kPerCommand, options, &info.value());
  if (!stream.ok()) return fail("open stream", stream.error());

  const Bytes digest(32, 0xab);
  if (auto st = stream.value()->extend(digest); !st.ok()) return fail("extend", st.error());
  if (auto st = stream.value()->finish(); !st.ok()) return fail("finish", st.error());

  auto value = pcr_read(tpm, alg::kSha256, 16);
  if (!value.ok()) return fail("read", value.error());
  auto expected = pcr_extended_value(alg::kSha256, Bytes(32, 0), digest);
  if (!expected.ok()) return fail("expected value", expected.error());
  std::printf("PCR 16 (sha256) = %s\n", to_hex(value.value()).c_str());
  if (value.value() != expected.value()) {
    std::fprintf(stderr, "protected_extend: PCR 16 is not H(0...0 || digest)\n");
    return 3;
  }
  std::printf("protected extend ok (per-command strategy, salted session)\n");
  return 0;
}
