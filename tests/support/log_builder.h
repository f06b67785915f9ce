// Builders of measurement logs for the replay tests: IMA logs (ascii and
// binary, each template) and TCG crypto-agile event logs, byte for byte in the
// kernel's and the TCG's layouts.
//
// Every digest here is computed with OpenSSL directly (EVP_Digest by name),
// never with tpmsec's parsers or crypto layer, so a test comparing the two can
// fail.
#ifndef TPMSEC_TESTS_SUPPORT_LOG_BUILDER_H_
#define TPMSEC_TESTS_SUPPORT_LOG_BUILDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tpmsec/bytes.h"

namespace tpmsec::testing {

// OpenSSL's digest of `data` with the algorithm of TPM_ALG_ID `alg`
// (sha1, sha256, sha384, sha512, sm3_256).
Bytes openssl_digest(uint16_t alg, ByteView data);
// H(old ‖ digest) with OpenSSL.
Bytes openssl_extend(uint16_t alg, ByteView old_value, ByteView digest);
// The SHA-256 PCR value after extending `value_hex` with `digest`, as hex
// (PCR values are compared as hex, so that a failure prints them readably).
std::string extended_hex(const std::string& value_hex, ByteView digest);

// ---- IMA ----

struct ImaRecord {
  uint32_t pcr = 10;
  std::string template_name = "ima-ng";     // "ima", "ima-ng", "ima-sig", "ima-buf"
  std::string digest_algorithm = "sha256";  // d-ng's algorithm (ignored for "ima")
  Bytes file_digest;                        // 20 bytes for "ima"
  std::string event_name;
  Bytes extra;             // sig (ima-sig) or buf (ima-buf)
  bool violation = false;  // logged with a zero template hash
  // The template-hash column's bank: sha1 in the classic lists, the file's
  // bank in a per-bank list (ascii_runtime_measurements_sha256, …).
  uint16_t hash_bank = 0x0004;
};

// A record of template `template_name` with contents varied by `seed`.
ImaRecord sample_ima_record(const std::string& template_name, int seed);
// A violation as the kernel logs it (zero file digest, zero template hash).
ImaRecord ima_violation(const std::string& template_name, const std::string& name);

// The bytes the kernel hashes for the template hash (ima_calc_field_array_hash_tfm).
Bytes ima_template_data(const ImaRecord& r);
// The logged template hash: the template data's hash in r.hash_bank (SHA-1
// in the classic lists), zeros for a violation.
Bytes ima_template_hash(const ImaRecord& r);
// One line of ascii_runtime_measurements, without the newline.
std::string ima_ascii_line(const ImaRecord& r);
// One entry of binary_runtime_measurements.
Bytes ima_binary_entry(const ImaRecord& r);
std::string ima_ascii_log(const std::vector<ImaRecord>& records);
Bytes ima_binary_log(const std::vector<ImaRecord>& records);
// What `pcr` of bank `alg` holds after the records, from zeros.
Bytes ima_expected_pcr(const std::vector<ImaRecord>& records, uint16_t alg, uint32_t pcr);

// ---- TCG crypto-agile event log ----

class EventLogBuilder {
 public:
  // The Spec ID event lists `banks` (TPM_ALG_IDs; sizes from OpenSSL).
  explicit EventLogBuilder(std::vector<uint16_t> banks);

  // A StartupLocality EV_NO_ACTION event.
  void startup_locality(uint8_t locality);
  // An event whose digest in each bank is H_bank(data).
  void measure(uint32_t pcr, uint32_t event_type, ByteView data);
  // An event with the given digests, as they are (for malformed logs too).
  void raw_event(uint32_t pcr, uint32_t event_type, const std::vector<std::pair<uint16_t, Bytes>>& digests,
                 ByteView data);

  // The whole log.
  Bytes bytes() const;
  // Offset of the i-th TCG_PCR_EVENT2 (from 1; 0 is the Spec ID event) in bytes().
  size_t event_offset(size_t index) const { return offsets_.at(index); }
  // The value of every PCR extended (plus PCR 0 with a startup locality), computed with OpenSSL.
  std::map<uint32_t, Bytes> expected_pcrs(uint16_t bank) const;

  // The first event alone, for tests that build their own header.
  static Bytes spec_id_event(const std::vector<std::pair<uint16_t, uint16_t>>& algorithms);

 private:
  struct Recorded {
    uint32_t pcr;
    uint32_t type;
    std::vector<std::pair<uint16_t, Bytes>> digests;
  };
  std::vector<uint16_t> banks_;
  Bytes log_;
  std::vector<size_t> offsets_;
  std::vector<Recorded> events_;
  int locality_ = -1;
};

// Little-endian appends for hand-made malformed input.
void put_le16(Bytes& out, uint16_t v);
void put_le32(Bytes& out, uint32_t v);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_LOG_BUILDER_H_
