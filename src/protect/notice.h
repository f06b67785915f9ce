// How the protect layer speaks to a person (protect.h's Notice).
#ifndef TPMSEC_SRC_PROTECT_NOTICE_H_
#define TPMSEC_SRC_PROTECT_NOTICE_H_

#include <string_view>

#include "tpmsec/protect.h"

namespace tpmsec {

// `line` through `notice`, else on stderr as "tpmsec: LINE". A line with a
// trailing newline (weak_strategy_notice's) is said without it; an empty one
// is not said.
void say(const Notice& notice, std::string_view line);

// EkCa: the EKs pinned for this TPM string (ek_pin.h) into `config`, and the
// hook that pins one on its first verified use and records a kernel-pin
// proof (anchor.cc).
Status pin_ek(const std::shared_ptr<HostState>& host, const TpmId& tpm, const Notice& notice, ProtectionConfig& config);

}  // namespace tpmsec

#endif  // TPMSEC_SRC_PROTECT_NOTICE_H_
