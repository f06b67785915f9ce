// A TPM's identity and the capabilities that decide what protection costs:
// what `tpmsec info` prints and what later policy rules match on.
#ifndef TPMSEC_TPM_INFO_H_
#define TPMSEC_TPM_INFO_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tpmsec/tpm.h"

namespace tpmsec {

struct PcrBank {
  uint16_t hash = 0;
  std::vector<uint32_t> pcrs;  // allocated PCR indices
};

struct TpmInfo {
  uint32_t manufacturer_raw = 0;
  std::string manufacturer;              // "IBM", "IFX": the four bytes, NULs and spaces trimmed
  std::array<uint32_t, 4> vendor_raw{};  // TPM_PT_VENDOR_STRING_1..4
  std::array<std::string, 4> vendor_strings;
  uint32_t firmware_version_1 = 0;
  uint32_t firmware_version_2 = 0;
  std::string spec_family;  // "2.0"
  uint32_t spec_level = 0;
  uint32_t spec_revision = 0;  // 164 means 1.64
  uint32_t spec_day_of_year = 0;
  uint32_t spec_year = 0;
  uint32_t tpm_type = 0;  // TPM_PT_VENDOR_TPM_TYPE
  uint32_t pcr_count = 0;
  std::vector<PcrBank> pcr_banks;
  bool ecc_p256 = false;
  bool rsa_2048 = false;
  uint32_t max_loaded_sessions = 0;    // TPM_PT_HR_LOADED_MIN
  uint32_t max_active_sessions = 0;    // TPM_PT_ACTIVE_SESSIONS_MAX
  uint32_t max_transient_objects = 0;  // TPM_PT_HR_TRANSIENT_MIN
  uint32_t max_object_context = 0;     // TPM_PT_MAX_OBJECT_CONTEXT
  uint32_t max_session_context = 0;    // TPM_PT_MAX_SESSION_CONTEXT
  uint32_t input_buffer = 0;           // TPM_PT_INPUT_BUFFER

  // Vendor strings joined, trailing spaces and NULs removed ("SLB9670").
  std::string vendor() const;
  // "A.B" from TPM_PT_FIRMWARE_VERSION_1 as vendors print it (high.low 16 bits).
  std::string firmware_version() const;
  // "2.0 level 0 revision 1.64 (2021)".
  std::string spec() const;
  const PcrBank* bank(uint16_t hash) const;
};

// Reads identity and capabilities with unauthenticated GetCapability calls.
Result<TpmInfo> read_tpm_info(Tpm& tpm);

// Four property bytes as text: "IBM" from 0x49424D00 (NULs and trailing spaces dropped,
// non-printable bytes as '.').
std::string property_text(uint32_t raw);

// The JSON form (docs/info-json.md) is in tpmsec/emulation/tpm_info_json.h.
// The text `tpmsec info` prints.
std::string to_text(const TpmInfo& info);

}  // namespace tpmsec

#endif  // TPMSEC_TPM_INFO_H_
