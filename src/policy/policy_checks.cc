#include "policy_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>

namespace tpmsec {
namespace {

bool same_text_ignoring_case(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool has_glob_characters(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

bool covers(const PolicyRule& earlier, const PolicyRule& later) {
  if (earlier.manufacturer &&
      !(later.manufacturer && same_text_ignoring_case(*earlier.manufacturer, *later.manufacturer))) {
    return false;
  }
  if (earlier.vendor && *earlier.vendor != "*") {
    if (!later.vendor) return false;
    bool same = *earlier.vendor == *later.vendor;
    bool literal_inside = !has_glob_characters(*later.vendor) && glob_match(*earlier.vendor, *later.vendor);
    if (!same && !literal_inside) return false;
  }
  if (earlier.firmware_min && !(later.firmware_min && *later.firmware_min >= *earlier.firmware_min)) return false;
  if (earlier.firmware_max && !(later.firmware_max && *later.firmware_max <= *earlier.firmware_max)) return false;
  for (const Condition& c : earlier.when) {
    if (std::find(later.when.begin(), later.when.end(), c) == later.when.end()) return false;
  }
  return true;
}

namespace {

// The values a property may take under a rule's conditions, as an interval.
struct Interval {
  double lo = -std::numeric_limits<double>::infinity();
  bool lo_open = true;
  double hi = std::numeric_limits<double>::infinity();
  bool hi_open = true;
  void apply(const Condition& c) {
    switch (c.op) {
      case Condition::Op::kGreater:
        if (c.value > lo || (c.value == lo && !lo_open)) { lo = c.value; lo_open = true; }
        break;
      case Condition::Op::kGreaterEqual:
        if (c.value > lo) { lo = c.value; lo_open = false; }
        break;
      case Condition::Op::kLess:
        if (c.value < hi || (c.value == hi && !hi_open)) { hi = c.value; hi_open = true; }
        break;
      case Condition::Op::kLessEqual:
        if (c.value < hi) { hi = c.value; hi_open = false; }
        break;
    }
  }
  bool empty() const { return lo > hi || (lo == hi && (lo_open || hi_open)); }
};

std::string describe(const PolicyRule& r) { return fmt::format("rule '{}' (line {})", r.name, r.line); }

}  // namespace

std::optional<RuleProblem> check_rules(const std::vector<PolicyRule>& rules) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const PolicyRule& rule = rules[i];
    if (rule.firmware_min && rule.firmware_max && *rule.firmware_min > *rule.firmware_max) {
      return RuleProblem{rule.line, fmt::format("{} can never match: firmware_min {} is above firmware_max {}",
                                                describe(rule), to_string(*rule.firmware_min),
                                                to_string(*rule.firmware_max))};
    }
    std::map<std::string, Interval> ranges;
    for (const Condition& c : rule.when) {
      Interval& range = ranges[c.property];
      range.apply(c);
      if (range.empty()) {
        return RuleProblem{rule.line, fmt::format("{} can never match: its conditions on {} contradict each other",
                                                  describe(rule), c.property)};
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (covers(rules[j], rule)) {
        return RuleProblem{rule.line, fmt::format("{} can never match: {} above matches every TPM it would",
                                                  describe(rule), describe(rules[j]))};
      }
    }
  }
  const PolicyRule& last = rules.back();
  if (!last.matches_everything()) {
    return RuleProblem{last.line, fmt::format("the last rule, {}, must match every TPM (a default rule with no "
                                              "manufacturer, vendor, firmware or when), so every TPM gets a decision",
                                              describe(last))};
  }
  return std::nullopt;
}

}  // namespace tpmsec
