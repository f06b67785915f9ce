// What a latency profile says at a glance: how much of it is measured
// (values counted by provenance tag), what it implies per protected PCR
// extend for each session lifecycle, and the warning an emulation built only
// on estimates must show.
#ifndef TPMSEC_EMULATION_PROFILE_SUMMARY_H_
#define TPMSEC_EMULATION_PROFILE_SUMMARY_H_

#include <cstddef>
#include <string>

#include "tpmsec/emulation/latency_profile.h"

namespace tpmsec {

// How much of a profile is measured: its tagged values (command variants,
// hmac_session, param_encryption_per_byte, tail events) counted by tag.
struct ProfileSummary {
  size_t values = 0;
  size_t measured = 0;  // M
  size_t derived = 0;   // D
  size_t proxy = 0;     // P
  size_t estimate = 0;  // E
  size_t bound = 0;     // B

  size_t measured_or_derived() const { return measured + derived; }
  // Fraction (0..1) of values tagged M or D.
  double measured_fraction() const { return values ? double(measured + derived) / double(values) : 0.0; }
  bool estimates_only() const { return values > 0 && estimate == values; }
};
ProfileSummary summarize(const LatencyProfile& profile);

// What a profile implies per PCR extend for the lifecycles of docs/strategies.md
// (means, no jitter or tails):
//   plain          PCR_Extend
//   hmac           PCR_Extend + hmac_session (resident steady state)
//   per_command    ContextLoad.object + StartAuthSession.ecc + FlushContext + hmac (Linux 6.10)
//   saved_context  ContextLoad.session + hmac + ContextSave.session
struct ExtendFigures {
  double plain_ms = 0;
  double hmac_ms = 0;
  double per_command_ms = 0;
  double saved_context_ms = 0;
  double audited_read_ms = 0;   // PCR_Read + hmac_session (a checkpoint's read)
  double start_session_ms = 0;  // StartAuthSession.ecc
  // Getting the null key loaded for a session: ContextLoad of its saved
  // context, or a fresh CreatePrimary (ECC, RSA).
  double reload_null_key_ms = 0;      // ContextLoad.object
  double create_null_key_ms = 0;      // CreatePrimary.ecc
  double create_null_key_rsa_ms = 0;  // CreatePrimary.rsa
};
ExtendFigures extend_figures(const LatencyProfile& profile);

// The warning to show when an emulation uses `profile`: non-empty when
// every value is an estimate (docs/latency-profiles.md: such a profile must say so).
std::string provenance_warning(const LatencyProfile& profile);

}  // namespace tpmsec

#endif  // TPMSEC_EMULATION_PROFILE_SUMMARY_H_
