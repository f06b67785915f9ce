#include "policy_checks.h"

#include <fmt/format.h>

#include "tpmsec/text.h"

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
        if (c.value > lo || (c.value == lo && !lo_open)) {
          lo = c.value;
          lo_open = true;
        }
        break;
      case Condition::Op::kGreaterEqual:
        if (c.value > lo) {
          lo = c.value;
          lo_open = false;
        }
        break;
      case Condition::Op::kLess:
        if (c.value < hi || (c.value == hi && !hi_open)) {
          hi = c.value;
          hi_open = true;
        }
        break;
      case Condition::Op::kLessEqual:
        if (c.value < hi) {
          hi = c.value;
          hi_open = false;
        }
        break;
    }
  }
  bool empty() const { return lo > hi || (lo == hi && (lo_open || hi_open)); }
};

std::string describe(const PolicyRule& r) { return fmt::format("rule '{}' (line {})", r.name, r.line); }

// The earlier rules that could cover a later one, indexed by what covers()
// requires first: a rule naming a manufacturer covers only rules naming the
// same one (any case), and a literal vendor only the same vendor. So a policy
// of N distinct chips is checked in N log N, not N² (200k rules took minutes).
class CoverIndex {
 public:
  void add(const PolicyRule& rule, size_t index) {
    Bucket& b = buckets_[rule.manufacturer ? "=" + ascii_lower(*rule.manufacturer) : std::string("*")];
    if (!rule.vendor || *rule.vendor == "*") {
      b.any_vendor.push_back(index);
    } else if (has_glob_characters(*rule.vendor)) {
      b.glob_vendor.push_back(index);
    } else {
      b.by_vendor[*rule.vendor].push_back(index);
    }
  }
  // The first earlier rule covering `later`, if any.
  std::optional<size_t> first_cover(const std::vector<PolicyRule>& rules, const PolicyRule& later) const {
    std::optional<size_t> best;
    auto consider = [&](const std::vector<size_t>& candidates) {
      for (size_t j : candidates) {
        if (best && j >= *best) break;  // ascending: nothing earlier follows
        if (covers(rules[j], later)) best = j;
      }
    };
    std::vector<std::string> keys = {"*"};
    if (later.manufacturer) keys.push_back("=" + ascii_lower(*later.manufacturer));
    for (const std::string& key : keys) {
      auto it = buckets_.find(key);
      if (it == buckets_.end()) continue;
      consider(it->second.any_vendor);
      consider(it->second.glob_vendor);
      if (later.vendor) {
        auto v = it->second.by_vendor.find(*later.vendor);
        if (v != it->second.by_vendor.end()) consider(v->second);
      }
    }
    return best;
  }

 private:
  struct Bucket {
    std::vector<size_t> any_vendor, glob_vendor;
    std::map<std::string, std::vector<size_t>> by_vendor;
  };
  std::map<std::string, Bucket> buckets_;
};

}  // namespace

std::optional<RuleProblem> check_rules(const std::vector<PolicyRule>& rules) {
  CoverIndex index;
  for (size_t i = 0; i < rules.size(); ++i) {
    const PolicyRule& rule = rules[i];
    if (rule.firmware_min && rule.firmware_max && *rule.firmware_min > *rule.firmware_max) {
      return RuleProblem{rule.line,
                         fmt::format("{} can never match: firmware_min {} is above firmware_max {}", describe(rule),
                                     to_string(*rule.firmware_min), to_string(*rule.firmware_max))};
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
    if (std::optional<size_t> j = index.first_cover(rules, rule)) {
      return RuleProblem{rule.line, fmt::format("{} can never match: {} above matches every TPM it would",
                                                describe(rule), describe(rules[*j]))};
    }
    index.add(rule, i);
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
