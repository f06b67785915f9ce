#include "support/log_builder.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdio>

#include "tpmsec/constants.h"

namespace tpmsec::testing {

namespace {

const char* openssl_name(uint16_t alg) {
  switch (alg) {
    case 0x0004:
      return "SHA1";
    case 0x000B:
      return "SHA256";
    case 0x000C:
      return "SHA384";
    case 0x000D:
      return "SHA512";
    case 0x0012:
      return "SM3";
    default:
      return nullptr;
  }
}

std::string hex(ByteView data) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : data) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

void put_bytes(Bytes& out, ByteView b) { out.insert(out.end(), b.begin(), b.end()); }
void put_text(Bytes& out, const std::string& s) { out.insert(out.end(), s.begin(), s.end()); }

// A deterministic byte string of `size` bytes from `seed`.
Bytes pattern(int seed, size_t size) {
  Bytes out(size);
  uint32_t x = 0x9e3779b9u * static_cast<uint32_t>(seed + 1);
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

constexpr uint16_t kSha1 = 0x0004;

}  // namespace

void put_le16(Bytes& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

void put_le32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

Bytes openssl_digest(uint16_t alg, ByteView data) {
  const char* name = openssl_name(alg);
  if (name == nullptr) {
    ADD_FAILURE() << "openssl_digest: unknown algorithm " << alg;
    return {};
  }
  EVP_MD* md = EVP_MD_fetch(nullptr, name, nullptr);
  Bytes out(EVP_MD_get_size(md));
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), out.data(), &size, md, nullptr);
  EVP_MD_free(md);
  out.resize(size);
  return out;
}

Bytes openssl_extend(uint16_t alg, ByteView old_value, ByteView digest) {
  Bytes both(old_value.begin(), old_value.end());
  put_bytes(both, digest);
  return openssl_digest(alg, both);
}

std::string extended_hex(const std::string& value_hex, ByteView digest) {
  return to_hex(openssl_extend(alg::kSha256, from_hex(value_hex).value(), digest));
}

// ---- IMA ----

ImaRecord sample_ima_record(const std::string& template_name, int seed) {
  ImaRecord r;
  r.template_name = template_name;
  r.pcr = 10;
  if (template_name == "ima") {
    r.digest_algorithm.clear();
    r.file_digest = pattern(seed, 20);
  } else {
    static const char* algorithms[] = {"sha256", "sha1", "sha512", "sha384", "md5"};
    static const size_t sizes[] = {32, 20, 64, 48, 16};
    int which = seed % 5;
    r.digest_algorithm = algorithms[which];
    r.file_digest = pattern(seed, sizes[which]);
  }
  char name[64];
  std::snprintf(name, sizeof(name), "/usr/lib/file-%d.so", seed);
  r.event_name = name;
  if (template_name == "ima-sig") {
    // Every third file unsigned: an empty last field.
    if (seed % 3 != 0) r.extra = concat({Bytes{0x03, 0x02}, pattern(seed + 7, 1 + seed % 300)});
  } else if (template_name == "ima-buf") {
    r.event_name = "kexec-cmdline";
    r.extra = pattern(seed + 3, seed % 200);
  }
  return r;
}

ImaRecord ima_violation(const std::string& template_name, const std::string& name) {
  ImaRecord r;
  r.template_name = template_name;
  r.digest_algorithm = template_name == "ima" ? "" : "sha256";
  r.file_digest = Bytes(20, 0);
  r.event_name = name;
  r.violation = true;
  return r;
}

Bytes ima_template_data(const ImaRecord& r) {
  Bytes data;
  if (r.template_name == "ima") {
    // d (20 bytes), then n zero-padded to 256 bytes; no length prefixes.
    put_bytes(data, r.file_digest);
    Bytes name(256, 0);
    std::copy(r.event_name.begin(), r.event_name.end(), name.begin());
    put_bytes(data, name);
    return data;
  }
  Bytes d_ng;
  put_text(d_ng, r.digest_algorithm);
  d_ng.push_back(':');
  d_ng.push_back(0);
  put_bytes(d_ng, r.file_digest);
  Bytes n_ng;
  put_text(n_ng, r.event_name);
  n_ng.push_back(0);
  put_le32(data, static_cast<uint32_t>(d_ng.size()));
  put_bytes(data, d_ng);
  put_le32(data, static_cast<uint32_t>(n_ng.size()));
  put_bytes(data, n_ng);
  if (r.template_name == "ima-sig" || r.template_name == "ima-buf") {
    put_le32(data, static_cast<uint32_t>(r.extra.size()));
    put_bytes(data, r.extra);
  }
  return data;
}

Bytes ima_template_hash(const ImaRecord& r) {
  if (r.violation) return Bytes(openssl_digest(r.hash_bank, {}).size(), 0);
  return openssl_digest(r.hash_bank, ima_template_data(r));
}

std::string ima_ascii_line(const ImaRecord& r) {
  // The kernel's "%2d %s %s" then " FIELD" per field.
  char pcr[16];
  std::snprintf(pcr, sizeof(pcr), "%2u", r.pcr);
  std::vector<std::string> columns = {pcr, hex(ima_template_hash(r)), r.template_name};
  if (r.template_name == "ima") {
    columns.push_back(hex(r.file_digest));
  } else {
    columns.push_back(r.digest_algorithm);
    columns.back().append(":").append(hex(r.file_digest));
  }
  columns.push_back(r.event_name);
  if (r.template_name == "ima-sig" || r.template_name == "ima-buf") columns.push_back(hex(r.extra));
  std::string line;
  for (const std::string& c : columns) {
    if (!line.empty()) line.push_back(' ');
    line.append(c);
  }
  return line;
}

Bytes ima_binary_entry(const ImaRecord& r) {
  Bytes out;
  put_le32(out, r.pcr);
  put_bytes(out, ima_template_hash(r));
  put_le32(out, static_cast<uint32_t>(r.template_name.size()));
  put_text(out, r.template_name);
  if (r.template_name == "ima") {
    put_bytes(out, r.file_digest);
    put_le32(out, static_cast<uint32_t>(r.event_name.size()));
    put_text(out, r.event_name);
  } else {
    Bytes data = ima_template_data(r);
    put_le32(out, static_cast<uint32_t>(data.size()));
    put_bytes(out, data);
  }
  return out;
}

std::string ima_ascii_log(const std::vector<ImaRecord>& records) {
  std::string out;
  for (const ImaRecord& r : records) out += ima_ascii_line(r) + "\n";
  return out;
}

Bytes ima_binary_log(const std::vector<ImaRecord>& records) {
  Bytes out;
  for (const ImaRecord& r : records) put_bytes(out, ima_binary_entry(r));
  return out;
}

Bytes ima_expected_pcr(const std::vector<ImaRecord>& records, uint16_t alg, uint32_t pcr) {
  Bytes value(openssl_digest(alg, {}).size(), 0);
  for (const ImaRecord& r : records) {
    if (r.pcr != pcr) continue;
    Bytes digest = r.violation ? Bytes(value.size(), 0xff) : openssl_digest(alg, ima_template_data(r));
    value = openssl_extend(alg, value, digest);
  }
  return value;
}

// ---- TCG crypto-agile event log ----

Bytes EventLogBuilder::spec_id_event(const std::vector<std::pair<uint16_t, uint16_t>>& algorithms) {
  Bytes spec;
  const char signature[16] = "Spec ID Event03";  // with its NUL
  spec.insert(spec.end(), signature, signature + 16);
  put_le32(spec, 0);  // platformClass: client
  spec.push_back(0);  // specVersionMinor
  spec.push_back(2);  // specVersionMajor
  spec.push_back(0);  // specErrata
  spec.push_back(2);  // uintnSize: 64-bit
  put_le32(spec, static_cast<uint32_t>(algorithms.size()));
  for (auto [alg, size] : algorithms) {
    put_le16(spec, alg);
    put_le16(spec, size);
  }
  spec.push_back(0);  // vendorInfoSize

  Bytes event;
  put_le32(event, 0);  // PCR 0
  put_le32(event, 3);  // EV_NO_ACTION
  event.insert(event.end(), 20, 0);
  put_le32(event, static_cast<uint32_t>(spec.size()));
  put_bytes(event, spec);
  return event;
}

EventLogBuilder::EventLogBuilder(std::vector<uint16_t> banks) : banks_(std::move(banks)) {
  std::vector<std::pair<uint16_t, uint16_t>> algorithms;
  for (uint16_t b : banks_) algorithms.emplace_back(b, static_cast<uint16_t>(openssl_digest(b, {}).size()));
  log_ = spec_id_event(algorithms);
  offsets_.push_back(0);
}

void EventLogBuilder::startup_locality(uint8_t locality) {
  const char signature[16] = "StartupLocality";
  Bytes data(signature, signature + 16);
  data.push_back(locality);
  std::vector<std::pair<uint16_t, Bytes>> digests;
  for (uint16_t b : banks_) digests.emplace_back(b, Bytes(openssl_digest(b, {}).size(), 0));
  raw_event(0, 3, digests, data);
  locality_ = locality;
}

void EventLogBuilder::measure(uint32_t pcr, uint32_t event_type, ByteView data) {
  std::vector<std::pair<uint16_t, Bytes>> digests;
  for (uint16_t b : banks_) digests.emplace_back(b, openssl_digest(b, data));
  raw_event(pcr, event_type, digests, data);
}

void EventLogBuilder::raw_event(uint32_t pcr, uint32_t event_type,
                                const std::vector<std::pair<uint16_t, Bytes>>& digests, ByteView data) {
  offsets_.push_back(log_.size());
  put_le32(log_, pcr);
  put_le32(log_, event_type);
  put_le32(log_, static_cast<uint32_t>(digests.size()));
  for (const auto& [alg, digest] : digests) {
    put_le16(log_, alg);
    put_bytes(log_, digest);
  }
  put_le32(log_, static_cast<uint32_t>(data.size()));
  put_bytes(log_, data);
  events_.push_back(Recorded{pcr, event_type, digests});
}

Bytes EventLogBuilder::bytes() const { return log_; }

std::map<uint32_t, Bytes> EventLogBuilder::expected_pcrs(uint16_t bank) const {
  size_t size = openssl_digest(bank, {}).size();
  std::map<uint32_t, Bytes> pcrs;
  if (locality_ >= 0) {
    pcrs[0] = Bytes(size, 0);
    pcrs[0].back() = static_cast<uint8_t>(locality_);
  }
  for (const Recorded& e : events_) {
    if (e.type == 3) continue;  // EV_NO_ACTION
    if (!pcrs.count(e.pcr)) pcrs[e.pcr] = Bytes(size, 0);
    for (const auto& [alg, digest] : e.digests) {
      if (alg == bank) pcrs[e.pcr] = openssl_extend(bank, pcrs[e.pcr], digest);
    }
  }
  return pcrs;
}

}  // namespace tpmsec::testing
