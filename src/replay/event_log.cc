// Parsing the TCG crypto-agile event log (layout in tpmsec/replay/event_log.h).
#include "tpmsec/replay/event_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "replay/little_endian.h"
#include "replay/printable.h"
#include "tpmsec/constants.h"
#include "tpmsec/wire.h"

namespace tpmsec::event_log {

namespace {

using replay_internal::printable;
using replay_internal::read_le16;
using replay_internal::read_le32;

constexpr size_t kSha1DigestSize = 20;
constexpr size_t kSignatureSize = 16;
constexpr std::string_view kSpecIdSignature("Spec ID Event03\0", kSignatureSize);
constexpr std::string_view kSpecIdSha1Prefix("Spec ID Event0", 14);  // 00 and 02: TPM 1.2 style logs
constexpr std::string_view kStartupLocalitySignature("StartupLocality\0", kSignatureSize);
constexpr size_t kMaxSpecIdEventSize = 4096;

std::string_view as_text(ByteView b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

Status fail_at(const Reader& r, size_t index, size_t offset) {
  return r.status().error().with_context(fmt::format("event {} at offset {}", index, offset));
}

// TCG_EfiSpecIdEvent; fails the reader on anything malformed.
SpecIdEvent read_spec_id(Reader& r) {
  SpecIdEvent spec;
  std::string_view signature = as_text(r.bytes(kSignatureSize, "Spec ID signature"));
  if (r.ok() && signature != kSpecIdSignature) {
    r.fail(fmt::format("the first event is not a Spec ID event (signature '{}')", printable(signature)));
  }
  if (!r.ok()) return spec;
  spec.platform_class = read_le32(r, "platformClass");
  spec.spec_version_minor = r.u8("specVersionMinor");
  spec.spec_version_major = r.u8("specVersionMajor");
  spec.spec_errata = r.u8("specErrata");
  spec.uintn_size = r.u8("uintnSize");
  size_t at = r.offset();
  uint32_t count = read_le32(r, "numberOfAlgorithms");
  if (r.ok() && (count == 0 || count > kMaxAlgorithms)) {
    r.fail(fmt::format("numberOfAlgorithms {} at offset {} is not 1 to {}", count, at, kMaxAlgorithms));
  }
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    AlgorithmSize a;
    at = r.offset();
    a.algorithm = read_le16(r, "algorithmId");
    a.digest_size = read_le16(r, "digestSize");
    if (!r.ok()) break;
    std::optional<uint16_t> known = digest_size(a.algorithm);
    if (known && *known != a.digest_size) {
      r.fail(fmt::format("digestSize {} at offset {} for {} should be {}", a.digest_size, at, hash_name(a.algorithm),
                         *known));
    } else if (a.digest_size == 0 || a.digest_size > kMaxDigestSize) {
      r.fail(fmt::format("digestSize {} at offset {} is not 1 to {}", a.digest_size, at, kMaxDigestSize));
    } else if (std::any_of(spec.algorithms.begin(), spec.algorithms.end(),
                           [&](const AlgorithmSize& b) { return b.algorithm == a.algorithm; })) {
      r.fail(fmt::format("algorithm 0x{:04x} at offset {} is listed twice", a.algorithm, at));
    }
    spec.algorithms.push_back(a);
  }
  uint8_t vendor_size = r.u8("vendorInfoSize");
  ByteView vendor = r.bytes(vendor_size, "vendorInfo");
  spec.vendor_info.assign(vendor.begin(), vendor.end());
  return spec;
}

// The first event, TCG_PCR_EVENT. The next event starts where the Spec ID
// structure ends, after vendorInfo, as tpm2-tools' tpm2_eventlog reads it
// (lib/tpm2_eventlog.c, specid_event()): firmware has been seen to log an
// eventSize that disagrees with vendorInfoSize. A disagreement is noted.
SpecIdEvent read_header(Reader& r, std::string* size_note) {
  uint32_t pcr = read_le32(r, "pcrIndex");
  uint32_t type = read_le32(r, "eventType");
  r.bytes(kSha1DigestSize, "digest");
  size_t at = r.offset();
  uint32_t size = read_le32(r, "eventSize");
  if (!r.ok()) return {};
  if (pcr != 0 || type != kEvNoAction) {
    r.fail(
        fmt::format("the first event is PCR {} type 0x{:x}, not the Spec ID event (PCR 0, EV_NO_ACTION)", pcr, type));
    return {};
  }
  if (size > kMaxSpecIdEventSize) {
    r.fail(fmt::format("eventSize {} at offset {} is above {} for the Spec ID event", size, at, kMaxSpecIdEventSize));
    return {};
  }
  const size_t start = r.offset();
  Reader body(r.rest().first(std::min<size_t>(r.remaining(), kMaxSpecIdEventSize + 255)), start);
  SpecIdEvent spec = read_spec_id(body);
  if (!body.ok()) {
    r.absorb(body);
    return spec;
  }
  const size_t used = body.offset() - start;
  if (used != size) {
    *size_note = fmt::format(
        "the Spec ID event's eventSize is {} but its vendorInfo ends after {} bytes; the next "
        "event is read after vendorInfo, as tpm2_eventlog does",
        size, used);
  }
  r.bytes(used, "Spec ID event");
  return spec;
}

// The end of an event in either format: u32 eventSize (bounded), the data.
void read_event_data(Reader& r, Event& e) {
  size_t at = r.offset();
  uint32_t size = read_le32(r, "eventSize");
  if (r.ok() && size > kMaxEventSize) {
    r.fail(fmt::format("eventSize {} at offset {} is above {}", size, at, kMaxEventSize));
  }
  ByteView data = r.bytes(size, "event data");
  e.data.assign(data.begin(), data.end());
}

// One TCG_PCR_EVENT2.
Event read_event(Reader& r, const SpecIdEvent& spec) {
  Event e;
  e.pcr = read_le32(r, "pcrIndex");
  e.event_type = read_le32(r, "eventType");
  if (r.ok() && e.event_type != kEvNoAction && e.pcr >= kPcrCount) {
    r.fail(fmt::format("PCR {} is above {}", e.pcr, kPcrCount - 1));
  }
  size_t at_count = r.offset();
  uint32_t count = read_le32(r, "digest count");
  if (r.ok() && count > spec.algorithms.size()) {
    r.fail(fmt::format("digest count {} at offset {} is above the Spec ID event's {} algorithms", count, at_count,
                       spec.algorithms.size()));
  }
  for (uint32_t i = 0; i < count && r.ok(); ++i) {
    size_t at = r.offset();
    uint16_t algorithm = read_le16(r, "hashAlg");
    auto listed = std::find_if(spec.algorithms.begin(), spec.algorithms.end(),
                               [&](const AlgorithmSize& a) { return a.algorithm == algorithm; });
    if (r.ok() && listed == spec.algorithms.end()) {
      r.fail(fmt::format("hashAlg 0x{:04x} at offset {} is not in the Spec ID event", algorithm, at));
    } else if (r.ok() && e.digest_for(algorithm) != nullptr) {
      r.fail(fmt::format("hashAlg 0x{:04x} at offset {} appears twice", algorithm, at));
    }
    if (!r.ok()) break;
    ByteView digest = r.bytes(listed->digest_size, "digest");
    e.digests.push_back(TaggedDigest{algorithm, Bytes(digest.begin(), digest.end())});
  }
  read_event_data(r, e);
  return e;
}

bool is_startup_locality(const Event& e) {
  return e.event_type == kEvNoAction && e.data.size() >= kSignatureSize &&
         std::memcmp(e.data.data(), kStartupLocalitySignature.data(), kSignatureSize) == 0;
}

// The SHA-1 log format (TCG_PCR_EVENT throughout: TPM 1.2, or TPM 2.0
// firmware logging SHA-1 only): a first event that is not EV_NO_ACTION (no
// Spec ID event at all), or a Spec ID event of the 1.2 kind ("Spec ID
// Event00" or "02"). A crypto-agile log starts with "Spec ID Event03".
bool is_sha1_log(ByteView data) {
  constexpr size_t kSignatureOffset = 4 + 4 + kSha1DigestSize + 4;
  if (data.size() < kSignatureOffset) return false;
  if ((uint32_t{data[4]} | uint32_t{data[5]} << 8 | uint32_t{data[6]} << 16 | uint32_t{data[7]} << 24) != kEvNoAction)
    return true;
  if (data.size() < kSignatureOffset + kSignatureSize) return false;
  std::string_view signature = as_text(data.subspan(kSignatureOffset, kSignatureSize));
  return signature.substr(0, kSpecIdSha1Prefix.size()) == kSpecIdSha1Prefix && signature != kSpecIdSignature;
}

// One TCG_PCR_EVENT of a SHA-1 log.
Event read_sha1_event(Reader& r) {
  Event e;
  e.pcr = read_le32(r, "pcrIndex");
  e.event_type = read_le32(r, "eventType");
  if (r.ok() && e.event_type != kEvNoAction && e.pcr >= kPcrCount) {
    r.fail(fmt::format("PCR {} is above {}", e.pcr, kPcrCount - 1));
  }
  ByteView digest = r.bytes(kSha1DigestSize, "digest");
  e.digests.push_back(TaggedDigest{alg::kSha1, Bytes(digest.begin(), digest.end())});
  read_event_data(r, e);
  return e;
}

}  // namespace

const Bytes* Event::digest_for(uint16_t algorithm) const {
  for (const TaggedDigest& d : digests) {
    if (d.algorithm == algorithm) return &d.digest;
  }
  return nullptr;
}

uint8_t EventLog::pcr0_locality() const {
  if (hcrtm) return kHcrtmLocality;
  return startup_locality.value_or(0);
}

std::vector<uint16_t> EventLog::banks() const {
  std::vector<uint16_t> out;
  for (const AlgorithmSize& a : spec_id.algorithms) out.push_back(a.algorithm);
  return out;
}

namespace {

// StartupLocality bookkeeping shared by both formats.
Status note_event(EventLog& log, const Event& e, bool* pcr0_extended) {
  if (is_startup_locality(e)) {
    std::string where = fmt::format("event {} at offset {}", e.index, e.offset);
    if (e.data.size() != kSignatureSize + 1) {
      return parse_error(
          fmt::format("{}: StartupLocality event is {} bytes, expected {}", where, e.data.size(), kSignatureSize + 1));
    }
    if (e.pcr != 0) return parse_error(fmt::format("{}: StartupLocality event names PCR {}, not 0", where, e.pcr));
    if (log.startup_locality) return parse_error(where + ": a second StartupLocality event");
    if (*pcr0_extended) return parse_error(where + ": StartupLocality event after PCR 0 was extended");
    log.startup_locality = e.data.back();
  }
  if (e.event_type == kEvEfiHcrtmEvent && e.pcr == 0) {
    // The H-CRTM measured before the firmware ran: _TPM_Hash_Start reset PCR 0
    // to locality 4 (TPM 2.0 Part 1 §34.3), and the firmware logs that
    // measurement first. After another PCR 0 extend the start is unknowable.
    std::string where = fmt::format("event {} at offset {}", e.index, e.offset);
    if (log.hcrtm) return parse_error(where + ": a second H-CRTM event in PCR 0");
    if (*pcr0_extended) return parse_error(where + ": H-CRTM event after PCR 0 was extended");
    log.hcrtm = true;
  }
  if (e.event_type != kEvNoAction && e.pcr == 0) *pcr0_extended = true;
  return ok_status();
}

Result<EventLog> parse_sha1_log(ByteView data) {
  EventLog log;
  log.format = LogFormat::kSha1;
  log.spec_id.algorithms.push_back(AlgorithmSize{alg::kSha1, kSha1DigestSize});
  Reader r(data);
  bool pcr0_extended = false;
  for (size_t index = 0; r.remaining() > 0; ++index) {
    size_t offset = r.offset();
    Event e = read_sha1_event(r);
    if (!r.ok()) return fail_at(r, index, offset).error();
    e.index = index;
    e.offset = offset;
    TPMSEC_RETURN_IF_ERROR(note_event(log, e, &pcr0_extended));
    log.events.push_back(std::move(e));
  }
  if (log.events.empty()) return parse_error("event 0 at offset 0: truncated pcrIndex");
  return log;
}

}  // namespace

Result<EventLog> parse_event_log(ByteView data) {
  if (is_sha1_log(data)) return parse_sha1_log(data);
  EventLog log;
  Reader r(data);
  log.spec_id = read_header(r, &log.spec_id_note);
  if (!r.ok()) return fail_at(r, 0, 0).error();
  bool pcr0_extended = false;
  for (size_t index = 1; r.remaining() > 0; ++index) {
    size_t offset = r.offset();
    Event e = read_event(r, log.spec_id);
    if (!r.ok()) return fail_at(r, index, offset).error();
    e.index = index;
    e.offset = offset;
    TPMSEC_RETURN_IF_ERROR(note_event(log, e, &pcr0_extended));
    log.events.push_back(std::move(e));
  }
  return log;
}

}  // namespace tpmsec::event_log
