// Re-importing over an earlier profile of the chip (`--keep`): what the
// earlier profile contributes; private to the emulation layer.
#ifndef TPMSEC_SRC_EMULATION_ALGTEST_KEEP_H_
#define TPMSEC_SRC_EMULATION_ALGTEST_KEEP_H_

#include "algtest_values.h"
#include "tpmsec/emulation/latency_profile.h"

namespace tpmsec::algtest {

// What an earlier profile `k` of the chip contributes to the imported `p`:
// the values that beat the import, its tail events, bus and seed, and its
// own note; the estimates that scale kept values are remade with `b`.
void keep_earlier(LatencyProfile& p, const LatencyProfile& k, const Builder& b);

}  // namespace tpmsec::algtest

#endif  // TPMSEC_SRC_EMULATION_ALGTEST_KEEP_H_
