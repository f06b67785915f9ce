// What a front end leaves on a TPM when its process dies, and how the next one ends it (tpm2-tss programs
// through the TCTI; a TPM that does not flush a closed connection's handles keeps them).
//   track_held_handles()   while a Tpm lives, records what it holds (HandleLedger::held()) in the host
//                          state, per TPM, with the process's stamp and the host's boot. A file write,
//                          never a TPM command.
//   flush_stale_handles()  when the next one starts, before it creates anything: flushes each handle a
//                          stale record (this boot, owner no longer runs) names that the TPM lists in the
//                          recorded state, and removes the record. Nothing is sent when no record is stale.
// Never flushes a handle no record names, or one a running process's record names (or another pid
// namespace's). With private_handles() or in process, stale records are removed and nothing is flushed.
// Ownership: the HostState holds the records; the Tpm is the caller's. Not thread-safe: the Tpm's thread.
// Errors come back as values (Result): the host state's, or the TPM's for a listing or flush.
// Why, what an unauthenticated listing can and cannot do, and what remains (reused handle numbers, a crash
// between a response and its record): docs/tcti.md, "A program killed mid-run" and its subsection
// "Held handles (include/tpmsec/held_handles.h)".
#ifndef TPMSEC_HELD_HANDLES_H_
#define TPMSEC_HELD_HANDLES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/host_state.h"
#include "tpmsec/result.h"
#include "tpmsec/tpm.h"
#include "tpmsec/tpm_id.h"

namespace tpmsec {

// What flush_stale_handles() did.
struct StaleHandles {
  size_t records = 0;             // stale records removed
  std::vector<uint32_t> flushed;  // handles flushed
};

// Flushes what the stale records of `tpm_id` name and removes those records
// (above). An error (the listing or a flush failed) leaves the records it
// concerns for the next start.
Result<StaleHandles> flush_stale_handles(Tpm& tpm, HostState& host, const TpmId& tpm_id, const std::string& boot);

// Records what `tpm` holds in `host`, as this process (above), for as long as
// `tpm` lives or until another watcher replaces this one. `warn` hears the
// first record that could not be written (none: nothing is said).
Status track_held_handles(Tpm& tpm, std::shared_ptr<HostState> host, TpmId tpm_id, std::string boot,
                          std::function<void(std::string_view)> warn = {});

}  // namespace tpmsec

#endif  // TPMSEC_HELD_HANDLES_H_
