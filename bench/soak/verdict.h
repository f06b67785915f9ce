// The soak's end (bench/soak): serve asked for its counts and its own session,
// stopped, the TPM's handles read after it; the table printed; whether the
// run passed.
#ifndef TPMSEC_BENCH_SOAK_VERDICT_H_
#define TPMSEC_BENCH_SOAK_VERDICT_H_

#include "soak/driver.h"
#include "soak/rig.h"

namespace tpmsec::soak {

// Prints the table on stdout and the failed checks on stderr; true when none failed.
bool verdict(Rig& rig, const Driver& driver, const SoakOptions& o, long max_growth_kib);

}  // namespace tpmsec::soak

#endif  // TPMSEC_BENCH_SOAK_VERDICT_H_
