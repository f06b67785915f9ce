// The protect path's TPM (`pcr extend`, `random`, `provision` ... without
// --emulate): the transport and a bare Tpm over it. Nothing here reaches the
// measurement layer: no MeasuredTpm, no tracing, no latency model.
// scripts/check-layers checks that this object references no symbol the
// tpmsec_measure or tpmsec_emulation libraries define (docs/architecture.md),
// so keep it in its own translation unit (CMakeLists.txt: no unity batch).
#include <fmt/format.h>

#include "cli.h"

namespace tpmsec::cli {

void warn_not_kept(const Error& e) {
  fmt::print(stderr, "tpmsec: warning: not kept for the next run: {}\n", e.message());
}

Result<OpenTpm> open_plain_tpm(const TpmOption& option, bool keep) {
  if (!option.emulate.empty()) return usage_error("the plain TPM path cannot emulate");
  OpenTpm out;
  TPMSEC_ASSIGN_OR_RETURN(std::string spec, option.tpm_string());
  TPMSEC_ASSIGN_OR_RETURN(out.base, open_transport(spec));
  out.cache = session_cache_for(*out.base, keep);
  TPMSEC_ASSIGN_OR_RETURN(std::optional<TpmInfo> known, kept_info_of(out.cache));
  out.plain = std::make_unique<Tpm>(*out.base);
  if (known) {
    out.plain_info = *known;
  } else {
    TPMSEC_ASSIGN_OR_RETURN(out.plain_info, read_tpm_info(*out.plain));
    if (out.cache) {
      if (Status st = out.cache->put_info(out.plain_info); !st.ok()) warn_not_kept(st.error());
    }
  }
  return out;
}

}  // namespace tpmsec::cli
