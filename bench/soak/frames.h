// The raw TPM command frames the soak's clients send through `tpmsec serve`
// (bench/soak), as a program on /dev/tpmrm0 writes them: no session of their
// own, a password session where the command needs an authorization (the
// server puts its salted session on each), and what the answers carry that
// the next command needs (a handle, a key's private and public areas, a
// saved context).
#ifndef TPMSEC_BENCH_SOAK_FRAMES_H_
#define TPMSEC_BENCH_SOAK_FRAMES_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "tpmsec/bytes.h"

namespace tpmsec::soak {

Bytes get_random(uint16_t bytes);
// PCR_Read of PCRs 0-7 in the SHA-256 bank.
Bytes pcr_read();
// CreatePrimary in the owner hierarchy: an ECC P-256 storage key (the SRK's
// template), empty authValue.
Bytes create_primary();
// Create under `parent`: a sealed data object (keyedhash), empty authValue.
Bytes create_sealed(uint32_t parent);
// Load under `parent` of what a Create answered (its outPrivate and outPublic).
Bytes load(uint32_t parent, ByteView created);
Bytes flush_context(uint32_t handle);
// StartAuthSession: an unbound, unsalted HMAC session, SHA-256, no symmetric.
Bytes start_hmac_session();
Bytes context_save(uint32_t handle);
// ContextLoad of what a ContextSave answered (`saved`: its whole response).
Bytes context_load(ByteView saved);
// GetCapability(TPM_CAP_HANDLES) from `first`, up to 64 handles.
Bytes get_handles(uint32_t first);

// The response code of a response frame; nullopt when it is shorter than a header
// or its size field disagrees with its length.
std::optional<uint32_t> response_code(ByteView response);
// The handle of a successful response's handle area (CreatePrimary, Load,
// StartAuthSession, ContextLoad); 0 when there is none.
uint32_t response_handle(ByteView response);
// The handles a GetCapability(TPM_CAP_HANDLES) answer lists; nullopt when it
// is not such an answer.
std::optional<std::vector<uint32_t>> listed_handles(ByteView response);

}  // namespace tpmsec::soak

#endif  // TPMSEC_BENCH_SOAK_FRAMES_H_
