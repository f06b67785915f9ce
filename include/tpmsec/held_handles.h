// What a front end leaves on a TPM when its process dies, and how the next
// one ends it (tpm2-tss programs through the TCTI, docs/tcti.md "A program
// killed mid-run").
//
// A program can be killed (SIGKILL, a crash, _exit) while the TCTI's session,
// or the null key between its ContextLoad and its flush, is loaded. A TPM
// that does not flush a closed connection's handles (swtpm, mssim,
// /dev/tpm0; not /dev/tpmrm0, whose resource manager does) keeps them, a
// session slot of three each, until someone runs tpm2_flushcontext.
//
// track_held_handles(): while a Tpm lives, what it holds (HandleLedger::
// held(): the handles it created and has not flushed, each session loaded or
// saved) is recorded in the host state, per TPM, with the process's stamp
// (HostState::this_process(): pid, start time, pid namespace) and the host's
// boot: written when one of its handles is created, rewritten when one is
// flushed, saved or loaded back, removed when none is left (Tpm::watch_held).
// A file write, never a TPM command.
//
// flush_stale_handles(), when the next one starts, before it creates
// anything: a record of this boot whose owner no longer runs
// (HostState::process_runs(): no such pid, a pid reused by a process that
// started at another time, a zombie) is stale. Each handle it names that the
// TPM lists (GetCapability(TPM_CAP_HANDLES)) in the state recorded — a loaded
// session among the loaded sessions, a saved one among the saved, an object
// among the transient objects — is flushed, and the record removed. A record
// of another boot is removed unread (a TPM Reset ended its handles). When no
// record is stale, nothing is sent. On a transport with private_handles()
// (the kernel flushed them) and in process (the TPM ended with its process)
// stale records are removed and nothing is flushed.
//
// What it never does: flush a handle no record names, or one named by the
// record of a process that runs (or of another pid namespace, which cannot
// be told). The listing is unauthenticated (no session exists yet): a lie
// in it can only keep a stale handle from being flushed, or make tpmsec
// flush a handle the stale record names; an interposer can flush any handle
// itself anyway (FlushContext needs no authorization, Part 3 §28.4).
//
// What remains (docs/tcti.md): handle numbers are reused (a TPM hands out
// the lowest free slot). A stale handle that someone else flushed
// (tpm2_flushcontext, a swtpm restarted within the host's boot) frees its
// number; a third program that got the same number and holds that handle in
// the same state when the next process starts (it leaked it too, or it runs
// on a TPM that serves several connections at once, or it saved a session
// under that number while the stale one was saved) loses it. A crash between
// a creating command's response and the record (microseconds) leaks the
// handle unrecorded, as before.
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
