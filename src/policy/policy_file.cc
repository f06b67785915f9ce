// Reading a policy file (TOML, parsed by toml++): every key checked, every
// problem reported as "FILE:LINE: what".
#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "policy_checks.h"
#include "tpmsec/policy/policy.h"

namespace tpmsec {
namespace {

constexpr std::string_view kSchema = "tpmsec-policy/1";
// A checkpoint at least every million extends: beyond, the end's check is the only one anyway.
constexpr int64_t kMaxCheckpointEvery = 1000000;

class PolicyReader {
 public:
  explicit PolicyReader(std::string origin) : origin_(std::move(origin)) {}

  Error error(size_t line, std::string_view what) const {
    return usage_error(fmt::format("{}:{}: {}", origin_, line, what));
  }
  static size_t line_of(const toml::node& n) { return n.source().begin.line; }

  Result<std::string> string_of(const toml::node& n, std::string_view key) const {
    const auto* s = n.as_string();
    if (!s) return error(line_of(n), fmt::format("'{}' must be a string", key));
    return std::string(s->get());
  }

  Result<StrategyKind> strategy_of(const toml::node& n, std::string_view key) const {
    TPMSEC_ASSIGN_OR_RETURN(std::string name, string_of(n, key));
    auto kind = parse_strategy(name);
    if (!kind.ok()) {
      return error(line_of(n), fmt::format("unknown strategy '{}' for '{}' (expected per-command, saved-context, "
                                           "resident, plain or checkpoint)",
                                           name, key));
    }
    return *kind;
  }

  Result<FirmwareVersion> firmware_of(const toml::node& n, std::string_view key) const {
    TPMSEC_ASSIGN_OR_RETURN(std::string text, string_of(n, key));
    auto v = parse_firmware_version(text);
    if (!v) return error(line_of(n), fmt::format("'{}' must be a version such as \"7.85\", got '{}'", key, text));
    return *v;
  }

  Result<Condition> condition_of(const toml::node& n) const {
    TPMSEC_ASSIGN_OR_RETURN(std::string text, string_of(n, "when"));
    std::istringstream in(text);
    std::string property, op, value, rest;
    in >> property >> op >> value >> rest;
    Condition c;
    c.property = property;
    if (op == "<")
      c.op = Condition::Op::kLess;
    else if (op == "<=")
      c.op = Condition::Op::kLessEqual;
    else if (op == ">")
      c.op = Condition::Op::kGreater;
    else if (op == ">=")
      c.op = Condition::Op::kGreaterEqual;
    else
      return error(line_of(n),
                   fmt::format("condition '{}' must read PROPERTY OP NUMBER with OP one of < <= > >=", text));
    char* end = nullptr;
    c.value = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !rest.empty()) {
      return error(line_of(n), fmt::format("condition '{}' must read PROPERTY OP NUMBER", text));
    }
    const auto& known = policy_properties();
    if (std::find(known.begin(), known.end(), property) == known.end()) {
      return error(line_of(n), fmt::format("unknown property '{}' in condition '{}' (known: {})", property, text,
                                           fmt::join(known, ", ")));
    }
    return c;
  }

  Result<PolicyRule> rule_of(const toml::table& t, size_t index) const {
    PolicyRule rule;
    rule.line = line_of(t);
    bool has_extend = false;
    for (auto&& [key, node] : t) {
      const std::string k(key.str());
      size_t line = line_of(node);
      if (k == "name") {
        TPMSEC_ASSIGN_OR_RETURN(rule.name, string_of(node, k));
      } else if (k == "manufacturer") {
        TPMSEC_ASSIGN_OR_RETURN(rule.manufacturer, string_of(node, k));
      } else if (k == "vendor") {
        TPMSEC_ASSIGN_OR_RETURN(rule.vendor, string_of(node, k));
      } else if (k == "firmware_min") {
        TPMSEC_ASSIGN_OR_RETURN(rule.firmware_min, firmware_of(node, k));
      } else if (k == "firmware_max") {
        TPMSEC_ASSIGN_OR_RETURN(rule.firmware_max, firmware_of(node, k));
      } else if (k == "when") {
        const auto* list = node.as_array();
        if (!list) return error(line, "'when' must be a list of conditions, e.g. [\"extend_hmac_ms > 20\"]");
        for (const toml::node& c : *list) {
          TPMSEC_ASSIGN_OR_RETURN(Condition cond, condition_of(c));
          rule.when.push_back(std::move(cond));
        }
      } else if (k == "extend") {
        TPMSEC_ASSIGN_OR_RETURN(rule.extend, strategy_of(node, k));
        has_extend = true;
      } else if (k == "other") {
        TPMSEC_ASSIGN_OR_RETURN(rule.other, strategy_of(node, k));
        if (rule.other == StrategyKind::kCheckpoint) {
          return error(line, "'other' cannot be checkpoint: checkpoints verify PCR extends only");
        }
      } else if (k == "fallback") {
        TPMSEC_ASSIGN_OR_RETURN(StrategyKind fallback, strategy_of(node, k));
        if (!prevents(fallback)) {
          return error(line,
                       "'fallback' must be a prevention strategy (per-command, saved-context or resident): it "
                       "is what the floor keeps");
        }
        rule.fallback = fallback;
      } else if (k == "trust_timings") {
        const auto* b = node.as_boolean();
        if (!b) return error(line, "'trust_timings' must be true or false");
        rule.trust_timings = b->get();
      } else if (k == "null_key") {
        TPMSEC_ASSIGN_OR_RETURN(std::string how, string_of(node, k));
        if (how == "reload")
          rule.null_key = NullKeyLoad::kReload;
        else if (how == "recreate")
          rule.null_key = NullKeyLoad::kRecreate;
        else
          return error(line, fmt::format("'null_key' must be \"reload\" or \"recreate\", got '{}'", how));
      } else if (k == "checkpoint_every") {
        const auto* n = node.as_integer();
        if (!n || n->get() < 0 || n->get() > kMaxCheckpointEvery) {
          return error(line, fmt::format("'checkpoint_every' must be a whole number from 0 (only at the end) to {}",
                                         kMaxCheckpointEvery));
        }
        rule.checkpoint_every = static_cast<uint32_t>(n->get());
      } else if (k == "reason") {
        TPMSEC_ASSIGN_OR_RETURN(rule.reason, string_of(node, k));
      } else if (k == "source") {
        TPMSEC_ASSIGN_OR_RETURN(rule.source, string_of(node, k));
      } else {
        return error(line, fmt::format("unknown key '{}' in a rule (known: name, manufacturer, vendor, firmware_min, "
                                       "firmware_max, when, extend, other, fallback, trust_timings, null_key, "
                                       "checkpoint_every, reason, source)",
                                       k));
      }
    }
    if (rule.name.empty()) rule.name = fmt::format("rule {}", index + 1);
    if (!has_extend) return error(rule.line, fmt::format("rule '{}' has no 'extend' strategy", rule.name));
    if (rule.reason.empty()) return error(rule.line, fmt::format("rule '{}' has no 'reason'", rule.name));
    if ((rule.fallback || rule.trust_timings) && !rule.lowers_protection()) {
      return error(rule.line, fmt::format("rule '{}' keeps prevention: 'fallback' and 'trust_timings' are for rules "
                                          "choosing plain or checkpoint",
                                          rule.name));
    }
    return rule;
  }

  Result<Policy> read(std::string_view text) const {
    toml::table root;
    try {
      root = toml::parse(text, origin_);
    } catch (const toml::parse_error& e) {
      return error(e.source().begin.line, std::string(e.description()));
    }
    Policy policy;
    policy.origin = origin_;
    bool has_schema = false;
    for (auto&& [key, node] : root) {
      const std::string k(key.str());
      if (k == "schema") {
        TPMSEC_ASSIGN_OR_RETURN(std::string schema, string_of(node, k));
        if (schema != kSchema) {
          return error(line_of(node), fmt::format("schema '{}' is not supported (expected '{}')", schema, kSchema));
        }
        has_schema = true;
      } else if (k == "rule") {
        const auto* rules = node.as_array();
        if (!rules) return error(line_of(node), "'rule' must be an array of tables: write each rule under [[rule]]");
        for (const toml::node& r : *rules) {
          const auto* t = r.as_table();
          if (!t) return error(line_of(r), "each rule must be a table ([[rule]])");
          TPMSEC_ASSIGN_OR_RETURN(PolicyRule rule, rule_of(*t, policy.rules.size()));
          policy.rules.push_back(std::move(rule));
        }
      } else {
        return error(line_of(node), fmt::format("unknown key '{}' (a policy has 'schema' and [[rule]] tables)", k));
      }
    }
    if (!has_schema) return error(1, fmt::format("missing schema = \"{}\"", kSchema));
    if (policy.rules.empty()) return error(1, "the policy has no rules");
    if (auto problem = check_rules(policy.rules)) return error(problem->line, problem->what);
    return policy;
  }

 private:
  std::string origin_;
};

}  // namespace

Result<Policy> parse_policy(std::string_view text, const std::string& origin) {
  return PolicyReader(origin).read(text);
}

Result<Policy> load_policy(const std::string& path) {
  std::ifstream in(path);
  if (!in) return usage_error(fmt::format("cannot read policy file {}: {}", path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return parse_policy(text.str(), path);
}

namespace {
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}
}  // namespace

std::string to_toml(const PolicyRule& r) {
  std::string out = "[[rule]]\n";
  out += fmt::format("name = {}\n", toml_string(r.name));
  if (r.manufacturer) out += fmt::format("manufacturer = {}\n", toml_string(*r.manufacturer));
  if (r.vendor) out += fmt::format("vendor = {}\n", toml_string(*r.vendor));
  if (r.firmware_min) out += fmt::format("firmware_min = \"{}\"\n", to_string(*r.firmware_min));
  if (r.firmware_max) out += fmt::format("firmware_max = \"{}\"\n", to_string(*r.firmware_max));
  if (!r.when.empty()) {
    std::vector<std::string> conditions;
    for (const Condition& c : r.when) conditions.push_back(toml_string(c.text()));
    out += fmt::format("when = [{}]\n", fmt::join(conditions, ", "));
  }
  out += fmt::format("extend = \"{}\"\n", strategy_name(r.extend));
  out += fmt::format("other = \"{}\"\n", strategy_name(r.other));
  if (r.fallback) out += fmt::format("fallback = \"{}\"\n", strategy_name(*r.fallback));
  if (r.trust_timings) out += "trust_timings = true\n";
  if (r.null_key) out += fmt::format("null_key = \"{}\"\n", null_key_load_name(*r.null_key));
  if (r.checkpoint_every) out += fmt::format("checkpoint_every = {}\n", *r.checkpoint_every);
  out += fmt::format("reason = {}\n", toml_string(r.reason));
  if (!r.source.empty()) out += fmt::format("source = {}\n", toml_string(r.source));
  return out;
}

}  // namespace tpmsec
