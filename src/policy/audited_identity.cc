// The TPM's identity read through an authenticated channel, for the policy
// decisions that rest on it (policy.h: read_audited_identity, decide_on_tpm).
//
// A plain GetCapability answer is whatever the bus delivers. In an audit
// session (TPM 2.0 Library Part 1, HMAC computation and session audit; Part 3
// §30.2 for GetCapability) the TPM's response HMAC covers
// rpHash = H(responseCode || commandCode || the capability data), keyed by a
// session key derived from a salt only the trusted salt key's owner can
// decrypt, and fresh nonces: an interposer can neither forge the answer nor
// replay one from another session.
#include <fmt/format.h>

#include "tpmsec/commands.h"
#include "tpmsec/policy/policy.h"

namespace tpmsec {
namespace {

// TPM_PT_MANUFACTURER .. TPM_PT_FIRMWARE_VERSION_2 (Part 2 §6.13): what
// policy rules key on, in one command.
constexpr uint32_t kFirst = pt::kManufacturer;
constexpr uint32_t kLast = pt::kFirmwareVersion2;

std::string identity_text(const TpmFacts& f) {
  return fmt::format("manufacturer \"{}\", vendor \"{}\", firmware {}", f.manufacturer, f.vendor,
                     f.firmware.empty() ? "unknown" : f.firmware);
}

}  // namespace

Result<TpmInfo> read_audited_identity(SessionFactory& factory) {
  if (!factory.keyed()) {
    return usage_error(
        "an audited identity read needs a salted or bound session: an unsalted audit session is forgeable by "
        "an interposer who saw it start");
  }
  // No continueSession: the TPM ends the session with the command.
  TPMSEC_ASSIGN_OR_RETURN(auto session, factory.start(attr::kAudit));
  Auth audit{session.get(), {}};
  cmd::GetCapability c{cap::kTpmProperties, kFirst, kLast - kFirst + 1};
  // Tpm::execute verifies the response HMAC before the response is parsed.
  auto rsp = factory.tpm().run(c, std::span<const Auth>(&audit, 1));
  if (!rsp.ok()) return rsp.error().with_context("audited identity read");
  if (rsp->capability_data.capability != cap::kTpmProperties) {
    return integrity_error("audited identity read: GetCapability answered a different capability than asked");
  }
  std::array<std::optional<uint32_t>, kLast - kFirst + 1> values;
  for (const auto& p : rsp->capability_data.properties) {
    if (p.property >= kFirst && p.property <= kLast) values[p.property - kFirst] = p.value;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) {
      return runtime_error(fmt::format("audited identity read: the TPM did not report property 0x{:03x}",
                                       kFirst + static_cast<uint32_t>(i)));
    }
  }
  auto get = [&](uint32_t p) { return *values[p - kFirst]; };
  TpmInfo info;
  info.manufacturer_raw = get(pt::kManufacturer);
  info.manufacturer = property_text(info.manufacturer_raw);
  for (uint32_t i = 0; i < 4; ++i) {
    info.vendor_raw[i] = get(pt::kVendorString1 + i);
    info.vendor_strings[i] = property_text(info.vendor_raw[i]);
  }
  info.tpm_type = get(pt::kVendorTpmType);
  info.firmware_version_1 = get(pt::kFirmwareVersion1);
  info.firmware_version_2 = get(pt::kFirmwareVersion2);
  return info;
}

Status confirm_identity(TpmFacts& facts, Tpm& tpm, const ProtectionConfig& protection, const TpmInfo* info) {
  TPMSEC_ASSIGN_OR_RETURN(auto factory, SessionFactory::create(tpm, protection, info));
  TPMSEC_ASSIGN_OR_RETURN(TpmInfo audited, read_audited_identity(*factory));
  TpmFacts confirmed = facts_from_info(audited);
  if (confirmed.manufacturer != facts.manufacturer || confirmed.vendor != facts.vendor ||
      confirmed.firmware != facts.firmware) {
    return integrity_error(fmt::format("the TPM's identity read through an audited session ({}) differs from the plain "
                                       "read ({}): an interposer "
                                       "rewrote the TPM's answer",
                                       identity_text(confirmed), identity_text(facts)))
        .with_reason(ErrorReason::kIdentityForged);
  }
  facts.identity_origin = FactOrigin::kAudited;
  return ok_status();
}

Result<PolicyDecision> decide_on_tpm(const Policy& policy, TpmFacts& facts, Tpm& tpm,
                                     const ProtectionConfig& protection, const TpmInfo* info) {
  PolicyDecision d = decide(policy, facts);
  if (!d.needs_audited_identity) return d;
  if (protection.unsalted) {
    facts.identity_note =
        "--unsalted: an unsalted audit session is forgeable by an interposer who saw it start, so the identity "
        "cannot be authenticated";
    return decide(policy, facts);
  }
  TPMSEC_RETURN_IF_ERROR(confirm_identity(facts, tpm, protection, info));
  return decide(policy, facts);
}

}  // namespace tpmsec
