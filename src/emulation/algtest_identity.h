// The identity and slot limits of a profile imported from tpm2-algtest,
// from the chip's fixed properties in the kept runs; private to the
// emulation layer.
#ifndef TPMSEC_SRC_EMULATION_ALGTEST_IDENTITY_H_
#define TPMSEC_SRC_EMULATION_ALGTEST_IDENTITY_H_

#include <string>
#include <vector>

#include "tpmsec/emulation/algtest_import.h"
#include "tpmsec/emulation/latency_profile.h"

namespace tpmsec::algtest {

// The run the profile's identity is read from: the first kept run of the
// most common firmware among the kept runs.
struct ReferenceRun {
  const AlgtestRun* run = nullptr;
  std::string firmware;
};

// The run the identity is read from, among the kept runs (at least one).
ReferenceRun reference_run(const std::vector<const AlgtestRun*>& kept);

// The profile's name and identity: the reference run's manufacturer and
// firmware, the vendor strings every kept run shares, and a note listing
// what the merged runs report.
void set_identity(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const ReferenceRun& reference,
                  const AlgtestImportOptions& options, const std::string& source);

// The chip's slot limits, when the reference run reports them.
void set_slots(LatencyProfile& p, const std::vector<const AlgtestRun*>& kept, const ReferenceRun& reference,
               const std::string& source);

}  // namespace tpmsec::algtest

#endif  // TPMSEC_SRC_EMULATION_ALGTEST_IDENTITY_H_
