#include "tpmsec/pcr.h"

#include "tpmsec/crypto.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>

namespace tpmsec {

Status check_pcr(const TpmInfo& info, uint16_t bank, uint32_t index) {
  if (index >= info.pcr_count) {
    return usage_error(fmt::format("PCR {} does not exist (this TPM has {} PCRs)", index, info.pcr_count));
  }
  const PcrBank* b = info.bank(bank);
  if (!b) {
    std::string banks;
    for (const auto& x : info.pcr_banks) banks += fmt::format("{}{}", banks.empty() ? "" : ", ", hash_name(x.hash));
    return usage_error(fmt::format("PCR bank {} is not allocated on this TPM (allocated: {})", hash_name(bank),
                                   banks.empty() ? "none" : banks));
  }
  if (std::find(b->pcrs.begin(), b->pcrs.end(), index) == b->pcrs.end()) {
    return usage_error(fmt::format("PCR {} is not allocated in the {} bank", index, hash_name(bank)));
  }
  return ok_status();
}

Status check_digest_length(uint16_t bank, ByteView digest) {
  auto size = digest_size(bank);
  if (!size) return usage_error(fmt::format("unknown hash algorithm 0x{:04x}", bank));
  if (digest.size() != *size) {
    return usage_error(fmt::format("digest must be {} bytes for {}, got {}", *size, hash_name(bank), digest.size()));
  }
  return ok_status();
}

Result<Bytes> pcr_read(Tpm& tpm, uint16_t bank, uint32_t index, std::span<const Auth> auths) {
  cmd::PcrRead c;
  c.pcr_selection_in.banks.push_back(PcrSelection::single(bank, index));
  TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(c, auths));
  // The TPM must answer exactly what was asked, with a digest of the bank's size.
  const auto& out = rsp.pcr_selection_out.banks;
  if (out.size() != 1 || out[0].hash != bank || !out[0].has(index) || rsp.pcr_values.digests.size() != 1) {
    return parse_error(
        fmt::format("PCR_Read returned a different selection than PCR {} of {}", index, hash_name(bank)));
  }
  Bytes value = rsp.pcr_values.digests[0];
  if (value.size() != digest_size(bank).value_or(0)) {
    return parse_error(fmt::format("PCR_Read returned {} bytes for a {} PCR", value.size(), hash_name(bank)));
  }
  return value;
}

Status pcr_extend(Tpm& tpm, uint16_t bank, uint32_t index, ByteView digest, const Auth& auth) {
  TPMSEC_RETURN_IF_ERROR(check_digest_length(bank, digest));
  cmd::PcrExtend c;
  c.pcr_handle = NamedHandle::of(index);
  c.digests.digests.push_back(TaggedHash{bank, Bytes(digest.begin(), digest.end())});
  TPMSEC_RETURN_IF_ERROR(tpm.run(c, {auth}));
  return ok_status();
}

Status pcr_reset(Tpm& tpm, uint32_t index, const Auth& auth) {
  cmd::PcrReset c;
  c.pcr_handle = NamedHandle::of(index);
  TPMSEC_RETURN_IF_ERROR(tpm.run(c, {auth}));
  return ok_status();
}

Result<Bytes> pcr_extended_value(uint16_t bank, ByteView old_value, ByteView digest) {
  return crypto::hash(bank, {old_value, digest});
}

}  // namespace tpmsec
