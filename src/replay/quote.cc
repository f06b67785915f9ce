// A quote's TPMS_ATTEST (TPM 2.0 Part 2 §10.12.12, TPMS_QUOTE_INFO §10.12.4)
// through the bounded wire Reader, and the PCR digest it carries.
#include <fmt/format.h>

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/replay/verify.h"
#include "tpmsec/wire.h"

namespace tpmsec::verify {

namespace {

constexpr uint32_t kTpmGeneratedValue = 0xff544347;  // TPM_GENERATED_VALUE, "\xffTCG"
constexpr uint16_t kStAttestQuote = 0x8018;          // TPM_ST_ATTEST_QUOTE
constexpr size_t kMaxNameSize = 2 + 64;              // TPM2B_NAME: hash alg + digest
constexpr size_t kMaxDataSize = 64;                  // TPM2B_DATA: sizeof(TPMT_HA)

bool is_tpm2b_attest(ByteView data) {
  if (data.size() < 6) return false;
  size_t size = size_t{data[0]} << 8 | data[1];
  uint32_t magic = uint32_t{data[2]} << 24 | uint32_t{data[3]} << 16 | uint32_t{data[4]} << 8 | data[5];
  return size == data.size() - 2 && magic == kTpmGeneratedValue;
}

}  // namespace

Result<Quote> parse_quote(ByteView data) {
  if (is_tpm2b_attest(data)) data = data.subspan(2);
  Reader r(data);
  Quote q;
  uint32_t magic = r.u32("TPMS_ATTEST.magic");
  if (r.ok() && magic != kTpmGeneratedValue) {
    return parse_error(fmt::format("magic 0x{:08x} is not TPM_GENERATED_VALUE: not a TPMS_ATTEST", magic));
  }
  uint16_t type = r.u16("TPMS_ATTEST.type");
  if (r.ok() && type != kStAttestQuote) {
    return parse_error(fmt::format("attestation type 0x{:04x} is not a quote (TPM_ST_ATTEST_QUOTE)", type));
  }
  ByteView signer = r.tpm2b("TPMS_ATTEST.qualifiedSigner", kMaxNameSize);
  q.qualified_signer.assign(signer.begin(), signer.end());
  ByteView extra = r.tpm2b("TPMS_ATTEST.extraData", kMaxDataSize);
  q.extra_data.assign(extra.begin(), extra.end());
  q.clock = r.u64("TPMS_CLOCK_INFO.clock");
  q.reset_count = r.u32("TPMS_CLOCK_INFO.resetCount");
  q.restart_count = r.u32("TPMS_CLOCK_INFO.restartCount");
  r.u8("TPMS_CLOCK_INFO.safe");
  q.firmware_version = r.u64("TPMS_ATTEST.firmwareVersion");
  unmarshal(r, q.selection);
  ByteView digest = r.tpm2b("TPMS_QUOTE_INFO.pcrDigest", 64);
  q.pcr_digest.assign(digest.begin(), digest.end());
  r.expect_end("TPMS_ATTEST");
  if (!r.ok()) return r.status().error();
  for (const PcrSelection& s : q.selection.banks) {
    if (!digest_size(s.hash))
      return parse_error(fmt::format("the quote selects bank 0x{:04x}, not a known hash", s.hash));
  }
  if (hashes_of_size(q.pcr_digest.size()).empty()) {
    return parse_error(fmt::format("pcrDigest of {} bytes is no digest size", q.pcr_digest.size()));
  }
  return q;
}

Result<Bytes> quote_pcr_digest(const PcrSelectionList& selection, const PcrValues& values, uint16_t hash) {
  std::vector<Bytes> parts;
  for (const PcrSelection& s : selection.banks) {
    auto bank = values.find(s.hash);
    for (uint32_t pcr = 0; pcr < 8 * s.select.size(); ++pcr) {
      if (!s.has(pcr)) continue;
      if (bank == values.end() || !bank->second.count(pcr)) {
        return usage_error(
            fmt::format("the quote selects PCR {} {}, which the values do not hold", pcr, hash_name(s.hash)));
      }
      parts.push_back(bank->second.at(pcr));
    }
  }
  crypto::Hasher h;
  TPMSEC_RETURN_IF_ERROR(h.init(hash));
  for (const Bytes& p : parts) h.update(p);
  return h.finish();
}

}  // namespace tpmsec::verify
