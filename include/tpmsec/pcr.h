// Plain PCR operations with the checks a user needs before the TPM sees the
// request: the PCR exists, the bank is allocated, the digest fits the bank.
#ifndef TPMSEC_PCR_H_
#define TPMSEC_PCR_H_

#include <cstdint>

#include "tpmsec/tpm.h"
#include "tpmsec/tpm_info.h"

namespace tpmsec {

// Checks `index` exists and `bank` is allocated for it on the TPM described by
// `info`. Errors are kUsage: "PCR 24 does not exist (this TPM has 24 PCRs)".
Status check_pcr(const TpmInfo& info, uint16_t bank, uint32_t index);

// Checks a digest's length against the bank's hash ("digest must be 32 bytes
// for sha256, got 31").
Status check_digest_length(uint16_t bank, ByteView digest);

// PCR_Read of one PCR in one bank. `auths` may carry an audit session.
Result<Bytes> pcr_read(Tpm& tpm, uint16_t bank, uint32_t index, std::span<const Auth> auths = {});

// PCR_Extend of one bank with `digest`, authorized by `auth` (password by default).
Status pcr_extend(Tpm& tpm, uint16_t bank, uint32_t index, ByteView digest, const Auth& auth = Auth::password());

// Whether PCR_Reset works on `index` at locality 0 on PC Client TPMs (16 and 23).
inline bool pcr_resettable(uint32_t index) { return index == 16 || index == 23; }
// PCR_Reset (works on the resettable PCRs).
Status pcr_reset(Tpm& tpm, uint32_t index, const Auth& auth = Auth::password());

// The value a PCR takes after extending `digest`: H(old || digest).
Result<Bytes> pcr_extended_value(uint16_t bank, ByteView old_value, ByteView digest);

}  // namespace tpmsec

#endif  // TPMSEC_PCR_H_
