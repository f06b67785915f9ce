// The text formats users and kernels hand to tpmsec: policy files (TOML) and
// ftrace function_graph captures. Any input must give a value or an error,
// never a crash, a hang or a sanitizer report; whatever parses must also go
// through what consumes it (a decision for every policy, a bench result and
// its reports for every capture).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tpmsec/measure/bench.h"
#include "tpmsec/measure/ftrace_import.h"
#include "tpmsec/policy/policy.h"

using namespace tpmsec;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto policy = parse_policy(text, "fuzz.toml");
  if (policy.ok()) {
    TpmFacts facts;
    facts.manufacturer = "IFX";
    facts.vendor = "SLB9670";
    facts.firmware = "7.85";
    facts.measured["extend_hmac_ms"] = 24.36;
    PolicyDecision d = decide(*policy, facts);
    if (!d.rule) __builtin_trap();  // a valid policy ends with a rule matching every TPM
    for (const PolicyRule& r : policy->rules) (void)to_toml(r);
  }

  auto capture = parse_function_graph(text, "fuzz.txt");
  if (capture.ok()) {
    auto result = bench_from_ftrace({*capture}, {});
    if (result.ok()) {
      (void)bench_text(*result);
      (void)bench_json(*result).dump();
    }
  }
  return 0;
}
