#include "tpmsec/tpm_info.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace tpmsec {
namespace {

Result<std::map<uint32_t, uint32_t>> read_properties(Tpm& tpm, uint32_t first, uint32_t last) {
  std::map<uint32_t, uint32_t> out;
  uint32_t next = first;
  // Bounded: a TPM that keeps saying moreData without progress is refused.
  for (int round = 0; round < 64 && next <= last; ++round) {
    cmd::GetCapability c{cap::kTpmProperties, next, last - next + 1};
    TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(c));
    const auto& props = rsp.capability_data.properties;
    if (rsp.capability_data.capability != cap::kTpmProperties) {
      return parse_error("GetCapability returned a different capability than asked");
    }
    uint32_t highest = next;
    for (const auto& p : props) {
      if (p.property < next || p.property > last) continue;
      out[p.property] = p.value;
      highest = std::max(highest, p.property);
    }
    if (!rsp.more_data || props.empty()) break;
    next = highest + 1;
  }
  return out;
}

Result<cmd::GetCapability::Response> get_capability(Tpm& tpm, uint32_t capability, uint32_t property, uint32_t count) {
  cmd::GetCapability c{capability, property, count};
  TPMSEC_ASSIGN_OR_RETURN(auto rsp, tpm.run(c));
  if (rsp.capability_data.capability != capability) {
    return parse_error("GetCapability returned a different capability than asked");
  }
  return rsp;
}

}  // namespace

std::string property_text(uint32_t raw) {
  std::string s;
  for (int shift = 24; shift >= 0; shift -= 8) {
    char c = static_cast<char>((raw >> shift) & 0xff);
    if (c == 0) continue;
    s.push_back(c >= 0x20 && c < 0x7f ? c : '.');
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string TpmInfo::vendor() const {
  std::string s;
  for (uint32_t raw : vendor_raw) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      char c = static_cast<char>((raw >> shift) & 0xff);
      if (c != 0) s.push_back(c >= 0x20 && c < 0x7f ? c : '.');
    }
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string TpmInfo::firmware_version() const {
  return fmt::format("{}.{}", firmware_version_1 >> 16, firmware_version_1 & 0xffff);
}

std::string TpmInfo::spec() const {
  return fmt::format("{} level {} revision {}.{:02} ({})", spec_family, spec_level, spec_revision / 100,
                     spec_revision % 100, spec_year);
}

const PcrBank* TpmInfo::bank(uint16_t hash) const {
  for (const auto& b : pcr_banks) {
    if (b.hash == hash) return &b;
  }
  return nullptr;
}

Result<TpmInfo> read_tpm_info(Tpm& tpm) {
  TpmInfo info;
  TPMSEC_ASSIGN_OR_RETURN(auto props, read_properties(tpm, pt::kFamilyIndicator, pt::kTotalCommands));
  auto get = [&props](uint32_t p) { return props.count(p) ? props[p] : 0u; };
  info.manufacturer_raw = get(pt::kManufacturer);
  info.manufacturer = property_text(info.manufacturer_raw);
  for (int i = 0; i < 4; ++i) {
    info.vendor_raw[i] = get(pt::kVendorString1 + i);
    info.vendor_strings[i] = property_text(info.vendor_raw[i]);
  }
  info.firmware_version_1 = get(pt::kFirmwareVersion1);
  info.firmware_version_2 = get(pt::kFirmwareVersion2);
  info.spec_family = property_text(get(pt::kFamilyIndicator));
  info.spec_level = get(pt::kLevel);
  info.spec_revision = get(pt::kRevision);
  info.spec_day_of_year = get(pt::kDayOfYear);
  info.spec_year = get(pt::kYear);
  info.tpm_type = get(pt::kVendorTpmType);
  info.pcr_count = get(pt::kPcrCount);
  info.max_loaded_sessions = get(pt::kHrLoadedMin);
  info.max_active_sessions = get(pt::kActiveSessionsMax);
  info.max_transient_objects = get(pt::kHrTransientMin);
  info.max_object_context = get(pt::kMaxObjectContext);
  info.max_session_context = get(pt::kMaxSessionContext);
  info.input_buffer = get(pt::kInputBuffer);

  TPMSEC_ASSIGN_OR_RETURN(auto pcrs, get_capability(tpm, cap::kPcrs, 0, 1));
  for (const auto& sel : pcrs.capability_data.pcrs.banks) {
    PcrBank bank{sel.hash, {}};
    for (uint32_t i = 0; i < sel.select.size() * 8; ++i) {
      if (sel.has(i)) bank.pcrs.push_back(i);
    }
    if (!bank.pcrs.empty()) info.pcr_banks.push_back(std::move(bank));
  }

  TPMSEC_ASSIGN_OR_RETURN(auto algs, get_capability(tpm, cap::kAlgs, 0, 1024));
  bool has_ecc = false, has_rsa = false;
  for (const auto& a : algs.capability_data.algorithms) {
    has_ecc |= a.alg == alg::kEcc;
    has_rsa |= a.alg == alg::kRsa;
  }
  if (has_ecc) {
    TPMSEC_ASSIGN_OR_RETURN(auto curves, get_capability(tpm, cap::kEccCurves, 0, 64));
    const auto& c = curves.capability_data.curves;
    info.ecc_p256 = std::find(c.begin(), c.end(), curve::kNistP256) != c.end();
  }
  // Every TPM 2.0 with RSA supports 2048-bit keys (PC Client profile minimum).
  info.rsa_2048 = has_rsa;
  return info;
}

std::string to_text(const TpmInfo& info) {
  std::string out;
  auto line = [&out](std::string_view key, const std::string& value) { out += fmt::format("{:<24}{}\n", key, value); };
  line("manufacturer", fmt::format("0x{:08X} \"{}\"", info.manufacturer_raw, info.manufacturer));
  for (int i = 0; i < 4; ++i) {
    line(fmt::format("vendor string {}", i + 1),
         fmt::format("0x{:08X} \"{}\"", info.vendor_raw[i], info.vendor_strings[i]));
  }
  line("firmware version", fmt::format("{} (0x{:08X} 0x{:08X})", info.firmware_version(), info.firmware_version_1,
                                       info.firmware_version_2));
  line("specification", info.spec());
  line("TPM type", std::to_string(info.tpm_type));
  std::string banks;
  for (const auto& b : info.pcr_banks) {
    banks += fmt::format("{}{} ({} PCRs)", banks.empty() ? "" : ", ", hash_name(b.hash), b.pcrs.size());
  }
  line("PCR banks", banks.empty() ? "none" : banks);
  line("ECC P-256", info.ecc_p256 ? "yes" : "no");
  line("RSA-2048", info.rsa_2048 ? "yes" : "no");
  line("loaded sessions", std::to_string(info.max_loaded_sessions));
  line("active sessions", std::to_string(info.max_active_sessions));
  line("transient objects", std::to_string(info.max_transient_objects));
  line("max context size",
       fmt::format("{} bytes (object {}, session {})", std::max(info.max_object_context, info.max_session_context),
                   info.max_object_context, info.max_session_context));
  return out;
}

}  // namespace tpmsec
