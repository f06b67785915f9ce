// A protected PCR extend through the library's one entry (tpmsec/protect.h),
// on a TPM behind a bus: protected_extend TPM [NULL_NAME], e.g.
//   protected_extend device:/dev/tpmrm0        (the kernel's null_name pin)
//   protected_extend swtpm:port=2321 000b...   (a pinned null key name)
// Build: see examples/CMakeLists.txt (find_package) or examples/Makefile (pkg-config).
#include <cstdio>

#include "tpmsec/protect.h"

int fail(const char* what, const tpmsec::Error& e) {
  std::fprintf(stderr, "protected_extend: %s: %s\n", what, e.message().c_str());
  return e.kind() == tpmsec::ErrorKind::kIntegrity ? 3 : 1;
}

int main(int argc, char** argv) {
  using namespace tpmsec;
  ProtectRequest request;
  request.tpm = argc > 1 ? argv[1] : "";  // empty: the host's TPM
  if (argc > 2) request.anchor = anchor::NullName{argv[2]};
  auto tpm = ProtectedTpm::open(request);
  if (!tpm.ok()) return fail("open", tpm.error());
  auto plan = tpm.value()->plan_extends();  // the shipped policy decides
  if (!plan.ok()) return fail("policy", plan.error());
  StreamOptions options;
  options.pcr = 16;
  options.one_shot = true;
  options.read_back = true;  // audited reads before and after, compared
  auto stream = tpm.value()->extend_stream(plan.value(), options);
  if (!stream.ok()) return fail("open stream", stream.error());
  if (auto st = stream.value()->extend(Bytes(32, 0xab)); !st.ok()) return fail("extend", st.error());
  auto value = stream.value()->read_back();
  if (!value.ok()) return fail("read back", value.error());
  std::printf("PCR 16 = %s\nprotected extend ok (%s)\n", to_hex(value.value()).c_str(),
              std::string(strategy_name(plan.value().strategy)).c_str());
  return 0;
}
