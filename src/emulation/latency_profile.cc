// A latency profile's provenance tags (docs/latency-profiles.md).
#include "tpmsec/emulation/latency_profile.h"

namespace tpmsec {

bool is_valid_tag(char tag) {
  return tag == kTagMeasured || tag == kTagDerived || tag == kTagProxy || tag == kTagEstimate || tag == kTagBound;
}

std::string_view tag_name(char tag) {
  switch (tag) {
    case kTagMeasured:
      return "measured";
    case kTagDerived:
      return "derived";
    case kTagProxy:
      return "proxy";
    case kTagEstimate:
      return "estimate";
    case kTagBound:
      return "bound";
  }
  return "?";
}

}  // namespace tpmsec
