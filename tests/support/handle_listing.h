// For transports in tests that answer from recordings: the handle ledger
// (tpmsec/handle_ledger.h) lists the TPM's handles with
// GetCapability(TPM_CAP_HANDLES) before the first creating command and when
// it sweeps; recordings of other clients (Linux, tpm2-tools) have no such
// exchange. These answer it as a TPM holding no handles does.
#ifndef TPMSEC_TESTS_SUPPORT_HANDLE_LISTING_H_
#define TPMSEC_TESTS_SUPPORT_HANDLE_LISTING_H_

#include "tpmsec/bytes.h"

namespace tpmsec::testing {

// Whether `command` is GetCapability(TPM_CAP_HANDLES, ...).
bool is_handle_listing(ByteView command);
// Its answer from a TPM without handles: moreData NO, an empty TPML_HANDLE.
Bytes empty_handle_listing();

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_HANDLE_LISTING_H_
