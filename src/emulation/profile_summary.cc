// What a profile says at a glance: how much of it is measured, what it
// implies per protected PCR extend for each session lifecycle, and whether
// it must warn that it rests on estimates only.
#include <fmt/format.h>

#include "tpmsec/emulation/profile_summary.h"

namespace tpmsec {
namespace {

void count(ProfileSummary& s, char tag) {
  ++s.values;
  switch (tag) {
    case kTagMeasured:
      ++s.measured;
      break;
    case kTagDerived:
      ++s.derived;
      break;
    case kTagProxy:
      ++s.proxy;
      break;
    case kTagEstimate:
      ++s.estimate;
      break;
    case kTagBound:
      ++s.bound;
      break;
  }
}

double mean(const LatencyProfile& p, const char* variant) {
  auto it = p.commands.find(variant);
  if (it != p.commands.end()) return it->second.ms;
  auto fallback = p.commands.find("default");
  return fallback != p.commands.end() ? fallback->second.ms : 0.0;
}

}  // namespace

ProfileSummary summarize(const LatencyProfile& p) {
  ProfileSummary s;
  for (const auto& [variant, value] : p.commands) count(s, value.tag);
  count(s, p.hmac_session.tag);
  count(s, p.param_encryption_per_byte.tag);
  for (const TailEvent& t : p.tail_events) count(s, t.tag);
  return s;
}

ExtendFigures extend_figures(const LatencyProfile& p) {
  ExtendFigures f;
  f.plain_ms = mean(p, "PCR_Extend");
  f.hmac_ms = f.plain_ms + p.hmac_session.ms;
  f.per_command_ms =
      mean(p, "ContextLoad.object") + mean(p, "StartAuthSession.ecc") + mean(p, "FlushContext") + f.hmac_ms;
  f.saved_context_ms = mean(p, "ContextLoad.session") + f.hmac_ms + mean(p, "ContextSave.session");
  f.audited_read_ms = mean(p, "PCR_Read") + p.hmac_session.ms;
  f.start_session_ms = mean(p, "StartAuthSession.ecc");
  f.reload_null_key_ms = mean(p, "ContextLoad.object");
  f.create_null_key_ms = mean(p, "CreatePrimary.ecc");
  f.create_null_key_rsa_ms = mean(p, "CreatePrimary.rsa");
  return f;
}

std::string provenance_warning(const LatencyProfile& p) {
  ProfileSummary s = summarize(p);
  if (!s.estimates_only()) return {};
  return fmt::format("profile '{}' is built only from estimates (tag E): no value in it was measured", p.id);
}

}  // namespace tpmsec
