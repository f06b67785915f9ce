// Latency profile files: finding, parsing, validating and writing them.
//
// Validation is strict so that a typo in a shipped profile is caught by the
// tests rather than silently modelled as zero: every key must be known (or
// start with '_', a comment), every value must carry a tag and a source.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "tpmsec/emulation/emulated_identity.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/host/data_dir.h"
#include "tpmsec/text.h"

namespace tpmsec {
namespace {

using nlohmann::json;

// Walks a JSON document, recording the first problem with its path
// ("commands.PCR_Extend.ms"). After a failure every check returns a default.
class Checker {
 public:
  explicit Checker(std::string origin) : origin_(std::move(origin)) {}

  bool ok() const { return !failed_; }
  Error error() const { return parse_error(error_); }

  void fail(const std::string& path, const std::string& problem) {
    if (failed_) return;
    failed_ = true;
    error_ = path.empty() ? fmt::format("{}: {}", origin_, problem) : fmt::format("{}: {}: {}", origin_, path, problem);
  }

  // The object at `path`, or nullptr (and a failure).
  const json* object(const json& j, const std::string& path) {
    if (!j.is_object()) {
      fail(path, fmt::format("expected an object, got {}", j.type_name()));
      return nullptr;
    }
    return &j;
  }

  // Fails on keys outside `known` (keys starting with '_' are comments).
  void only_keys(const json& obj, const std::string& path, std::initializer_list<std::string_view> known) {
    if (!obj.is_object()) return;
    for (const auto& [key, value] : obj.items()) {
      if (!key.empty() && key[0] == '_') continue;
      if (std::find(known.begin(), known.end(), key) == known.end()) fail(join(path, key), "unknown key");
    }
  }

  const json* member(const json& obj, const std::string& path, std::string_view key, bool required) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) fail(path, fmt::format("missing key '{}'", key));
      return nullptr;
    }
    return &*it;
  }

  std::string string(const json& obj, const std::string& path, std::string_view key, bool required,
                     size_t max_size = 0) {
    const json* m = member(obj, path, key, required);
    if (!m) return {};
    if (!m->is_string()) {
      fail(join(path, key), fmt::format("expected a string, got {}", m->type_name()));
      return {};
    }
    std::string s = m->get<std::string>();
    if (max_size && s.size() > max_size) {
      fail(join(path, key), fmt::format("'{}' is longer than {} bytes", s, max_size));
      return {};
    }
    return s;
  }

  // A finite number >= 0 (latencies, probabilities).
  double non_negative(const json& obj, const std::string& path, std::string_view key, bool required,
                      std::string_view what) {
    const json* m = member(obj, path, key, required);
    if (!m) return 0;
    if (!m->is_number()) {
      fail(join(path, key), fmt::format("expected a number, got {}", m->type_name()));
      return 0;
    }
    double v = m->get<double>();
    if (!std::isfinite(v)) {
      fail(join(path, key), fmt::format("{} is not finite", what));
      return 0;
    }
    if (v < 0) {
      fail(join(path, key), fmt::format("negative {} {}", what, v));
      return 0;
    }
    return v;
  }

  uint64_t unsigned_integer(const json& obj, const std::string& path, std::string_view key, bool required) {
    const json* m = member(obj, path, key, required);
    if (!m) return 0;
    if (!m->is_number_unsigned()) {
      fail(join(path, key), fmt::format("expected an unsigned integer, got {}", m->dump()));
      return 0;
    }
    return m->get<uint64_t>();
  }

  bool boolean(const json& obj, const std::string& path, std::string_view key, bool fallback) {
    const json* m = member(obj, path, key, false);
    if (!m) return fallback;
    if (!m->is_boolean()) {
      fail(join(path, key), fmt::format("expected true or false, got {}", m->dump()));
      return fallback;
    }
    return m->get<bool>();
  }

  char tag(const json& obj, const std::string& path) {
    std::string t = string(obj, path, "tag", true);
    if (!ok()) return kTagEstimate;
    if (t.size() != 1 || !is_valid_tag(t[0])) {
      fail(join(path, "tag"), fmt::format("unknown tag '{}' (expected M, D, P, E or B)", t));
      return kTagEstimate;
    }
    return t[0];
  }

  std::string source(const json& obj, const std::string& path) {
    std::string s = string(obj, path, "source", true);
    if (ok() && s.empty()) fail(join(path, "source"), "empty source (every value names where it comes from)");
    return s;
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }

 private:
  std::string origin_;
  bool failed_ = false;
  std::string error_;
};

LatencyValue read_value(Checker& c, const json& j, const std::string& path) {
  LatencyValue v;
  if (!c.object(j, path)) return v;
  c.only_keys(j, path,
              {"ms", "jitter_ms", "tag", "source", "note", "low_ms", "high_ms", "runs", "iterations", "distribution"});
  v.ms = c.non_negative(j, path, "ms", true, "latency");
  v.jitter_ms = c.non_negative(j, path, "jitter_ms", false, "jitter");
  v.tag = c.tag(j, path);
  v.source = c.source(j, path);
  v.note = c.string(j, path, "note", false);
  if (c.member(j, path, "low_ms", false)) v.low_ms = c.non_negative(j, path, "low_ms", true, "latency");
  if (c.member(j, path, "high_ms", false)) v.high_ms = c.non_negative(j, path, "high_ms", true, "latency");
  if (c.ok() && v.low_ms.has_value() != v.high_ms.has_value()) c.fail(path, "low_ms and high_ms go together");
  if (c.ok() && v.low_ms && (*v.low_ms > v.ms || *v.high_ms < v.ms)) {
    c.fail(path, fmt::format("range {}-{} does not contain ms {}", *v.low_ms, *v.high_ms, v.ms));
  }
  v.runs = static_cast<uint32_t>(c.member(j, path, "runs", false) ? c.unsigned_integer(j, path, "runs", true) : 0);
  v.iterations = c.member(j, path, "iterations", false) ? c.unsigned_integer(j, path, "iterations", true) : 0;
  if (const json* d = c.member(j, path, "distribution", false); d && c.object(*d, path + ".distribution")) {
    std::string dpath = path + ".distribution";
    c.only_keys(*d, dpath, {"n", "median_ms", "p5_ms", "p95_ms", "max_ms"});
    ValueDistribution dist;
    dist.n = c.unsigned_integer(*d, dpath, "n", true);
    dist.median_ms = c.non_negative(*d, dpath, "median_ms", true, "latency");
    dist.p5_ms = c.non_negative(*d, dpath, "p5_ms", true, "latency");
    dist.p95_ms = c.non_negative(*d, dpath, "p95_ms", true, "latency");
    dist.max_ms = c.non_negative(*d, dpath, "max_ms", true, "latency");
    if (c.ok() && !(dist.p5_ms <= dist.median_ms && dist.median_ms <= dist.p95_ms && dist.p95_ms <= dist.max_ms)) {
      c.fail(dpath, "expected p5_ms <= median_ms <= p95_ms <= max_ms");
    }
    v.distribution = dist;
  }
  return v;
}

TailEvent read_tail(Checker& c, const json& j, const std::string& path) {
  TailEvent t;
  if (!c.object(j, path)) return t;
  c.only_keys(j, path, {"variant", "probability", "extra_ms", "tag", "source", "note", "enabled"});
  t.variant = c.string(j, path, "variant", true);
  if (c.ok() && t.variant.empty()) c.fail(Checker::join(path, "variant"), "empty variant pattern");
  t.probability = c.non_negative(j, path, "probability", true, "probability");
  if (c.ok() && t.probability > 1)
    c.fail(Checker::join(path, "probability"), fmt::format("probability {} above 1", t.probability));
  t.extra_ms = c.non_negative(j, path, "extra_ms", true, "latency");
  t.tag = c.tag(j, path);
  t.source = c.source(j, path);
  t.note = c.string(j, path, "note", false);
  t.enabled = c.boolean(j, path, "enabled", true);
  return t;
}

ProfileIdentity read_identity(Checker& c, const json& j, const std::string& path) {
  ProfileIdentity id;
  if (!c.object(j, path)) return id;
  c.only_keys(j, path, {"manufacturer", "vendor_strings", "firmware", "bus", "source", "note"});
  id.manufacturer = c.string(j, path, "manufacturer", true, 4);
  if (c.ok() && id.manufacturer.empty()) c.fail(Checker::join(path, "manufacturer"), "empty manufacturer");
  if (const json* vs = c.member(j, path, "vendor_strings", false)) {
    std::string vpath = Checker::join(path, "vendor_strings");
    if (!vs->is_array() || vs->size() > 4) {
      c.fail(vpath, "expected an array of at most 4 strings");
    } else {
      for (size_t i = 0; i < vs->size(); ++i) {
        const json& s = (*vs)[i];
        if (!s.is_string() || s.get<std::string>().size() > 4) {
          c.fail(fmt::format("{}[{}]", vpath, i), "expected a string of at most 4 bytes");
          break;
        }
        id.vendor_strings[i] = s.get<std::string>();
      }
    }
  }
  id.firmware = c.string(j, path, "firmware", false);
  if (c.ok() && !id.firmware.empty() && firmware_value(id.firmware) == 0) {
    c.fail(Checker::join(path, "firmware"), fmt::format("'{}' is not MAJOR.MINOR", id.firmware));
  }
  id.bus = c.string(j, path, "bus", true);
  id.source = c.source(j, path);
  id.note = c.string(j, path, "note", false);
  return id;
}

SlotLimits read_slots(Checker& c, const json& j, const std::string& path) {
  SlotLimits s;
  if (!c.object(j, path)) return s;
  c.only_keys(
      j, path,
      {"max_loaded_sessions", "max_transient_objects", "active_sessions_max", "context_gap_max", "source", "note"});
  s.max_loaded_sessions = static_cast<uint32_t>(c.unsigned_integer(j, path, "max_loaded_sessions", true));
  s.max_transient_objects = static_cast<uint32_t>(c.unsigned_integer(j, path, "max_transient_objects", true));
  if (c.member(j, path, "active_sessions_max", false)) {
    s.active_sessions_max = static_cast<uint32_t>(c.unsigned_integer(j, path, "active_sessions_max", true));
  }
  if (c.member(j, path, "context_gap_max", false)) {
    s.context_gap_max = static_cast<uint32_t>(c.unsigned_integer(j, path, "context_gap_max", true));
  }
  s.source = c.string(j, path, "source", false);
  s.note = c.string(j, path, "note", false);
  return s;
}

bool is_bare_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  if (s.size() >= 5 && s.compare(s.size() - 5, 5, ".json") == 0) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

std::vector<std::string> known_profile_names(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

json value_json(const LatencyValue& v) {
  json j{{"ms", v.ms}, {"jitter_ms", v.jitter_ms}, {"tag", std::string(1, v.tag)}, {"source", v.source}};
  if (!v.note.empty()) j["note"] = v.note;
  if (v.low_ms) j["low_ms"] = *v.low_ms;
  if (v.high_ms) j["high_ms"] = *v.high_ms;
  if (v.runs) j["runs"] = v.runs;
  if (v.iterations) j["iterations"] = v.iterations;
  if (v.distribution) {
    j["distribution"] = {{"n", v.distribution->n},
                         {"median_ms", v.distribution->median_ms},
                         {"p5_ms", v.distribution->p5_ms},
                         {"p95_ms", v.distribution->p95_ms},
                         {"max_ms", v.distribution->max_ms}};
  }
  return j;
}

}  // namespace

std::string profiles_dir() { return data_dir() + "/profiles"; }

std::string profile_path(const std::string& name_or_path) {
  if (is_bare_name(name_or_path)) return profiles_dir() + "/" + name_or_path + ".json";
  return name_or_path;
}

Result<LatencyProfile> profile_from_json(const json& j, const std::string& origin) {
  Checker c(origin);
  LatencyProfile p;
  // Exceptions cannot come out of the checks (types are tested before every
  // get), but the API promise is kept even for a nlohmann surprise.
  try {
    if (!c.object(j, "")) return c.error();
    c.only_keys(j, "",
                {"id", "name", "note", "identity", "seed", "commands", "hmac_session", "param_encryption_per_byte",
                 "tail_events", "slots"});
    p.id = c.string(j, "", "id", true);
    if (c.ok() && p.id.empty()) c.fail("id", "empty id");
    p.name = c.string(j, "", "name", true);
    p.note = c.string(j, "", "note", false);
    if (const json* id = c.member(j, "", "identity", true)) p.identity = read_identity(c, *id, "identity");
    p.seed = c.unsigned_integer(j, "", "seed", true);
    if (const json* cmds = c.member(j, "", "commands", true); cmds && c.object(*cmds, "commands")) {
      for (const auto& [variant, value] : cmds->items()) {
        if (!variant.empty() && variant[0] == '_') continue;
        p.commands[variant] = read_value(c, value, "commands." + variant);
      }
      for (std::string_view required : kRequiredVariants) {
        if (c.ok() && !p.commands.count(std::string(required))) {
          c.fail("commands", fmt::format("missing key '{}'", required));
        }
      }
    }
    if (const json* h = c.member(j, "", "hmac_session", true)) p.hmac_session = read_value(c, *h, "hmac_session");
    if (const json* e = c.member(j, "", "param_encryption_per_byte", true)) {
      p.param_encryption_per_byte = read_value(c, *e, "param_encryption_per_byte");
    }
    if (const json* tails = c.member(j, "", "tail_events", false)) {
      if (!tails->is_array()) {
        c.fail("tail_events", "expected an array");
      } else {
        for (size_t i = 0; i < tails->size() && c.ok(); ++i) {
          p.tail_events.push_back(read_tail(c, (*tails)[i], fmt::format("tail_events[{}]", i)));
        }
      }
    }
    if (const json* s = c.member(j, "", "slots", false)) p.slots = read_slots(c, *s, "slots");
  } catch (const json::exception& e) {
    c.fail("", fmt::format("unexpected JSON content: {}", e.what()));
  }
  if (!c.ok()) return c.error();
  return p;
}

Result<LatencyProfile> parse_profile(std::string_view text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is the 1-based offset of the character that failed.
    size_t end = std::min<size_t>(e.byte ? e.byte - 1 : 0, text.size());
    size_t line = 1, column = 1;
    for (size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string detail = e.what();
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..." -> the problem.
    if (size_t pos = detail.find(": "); pos != std::string::npos) detail = detail.substr(pos + 2);
    return parse_error(fmt::format("{}: bad JSON at line {}, column {}: {}", origin, line, column, detail));
  } catch (const json::exception& e) {
    return parse_error(fmt::format("{}: bad JSON: {}", origin, e.what()));
  }
  return profile_from_json(j, origin);
}

Result<LatencyProfile> load_profile(const std::string& name_or_path) {
  std::string path = profile_path(name_or_path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (is_bare_name(name_or_path)) {
      std::vector<std::string> known = known_profile_names(profiles_dir());
      return usage_error(fmt::format("unknown profile '{}' (no {}; known: {})", name_or_path, path,
                                     known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
    }
    return usage_error(fmt::format("{}: no such profile file", path));
  }
  // An input file the user named that cannot be read is bad input (exit 2),
  // as every command's (README, "Exit status").
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return usage_error(fmt::format("cannot read {}: {}", path, errno ? std::strerror(errno) : "cannot open"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return usage_error(fmt::format("cannot read {}: read failed", path));
  return parse_profile(buffer.str(), path);
}

Result<std::vector<LatencyProfile>> load_profiles(const std::string& list) {
  if (list.empty() || list == "all") return load_all_profiles();
  std::vector<LatencyProfile> out;
  for (const std::string& name : split_list(list)) {
    TPMSEC_ASSIGN_OR_RETURN(LatencyProfile p, load_profile(name));
    out.push_back(std::move(p));
  }
  if (out.empty()) return usage_error(fmt::format("no profile named in '{}'", list));
  return out;
}

Result<std::vector<LatencyProfile>> load_all_profiles(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return runtime_error(fmt::format("{}: no profile directory", dir));
  std::vector<LatencyProfile> out;
  for (const std::string& name : known_profile_names(dir)) {
    TPMSEC_ASSIGN_OR_RETURN(LatencyProfile p, load_profile(dir + "/" + name + ".json"));
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const LatencyProfile& a, const LatencyProfile& b) { return a.id < b.id; });
  return out;
}

json to_json(const LatencyProfile& p) {
  json identity{{"manufacturer", p.identity.manufacturer},
                {"vendor_strings",
                 json(std::vector<std::string>(p.identity.vendor_strings.begin(), p.identity.vendor_strings.end()))},
                {"firmware", p.identity.firmware},
                {"bus", p.identity.bus},
                {"source", p.identity.source}};
  if (!p.identity.note.empty()) identity["note"] = p.identity.note;
  json commands = json::object();
  for (const auto& [variant, value] : p.commands) commands[variant] = value_json(value);
  json tails = json::array();
  for (const TailEvent& t : p.tail_events) {
    json tj{{"variant", t.variant},         {"probability", t.probability}, {"extra_ms", t.extra_ms},
            {"tag", std::string(1, t.tag)}, {"source", t.source},           {"enabled", t.enabled}};
    if (!t.note.empty()) tj["note"] = t.note;
    tails.push_back(std::move(tj));
  }
  json j{{"id", p.id},
         {"name", p.name},
         {"identity", identity},
         {"seed", p.seed},
         {"commands", commands},
         {"hmac_session", value_json(p.hmac_session)},
         {"param_encryption_per_byte", value_json(p.param_encryption_per_byte)},
         {"tail_events", tails},
         {"slots",
          {{"max_loaded_sessions", p.slots.max_loaded_sessions},
           {"max_transient_objects", p.slots.max_transient_objects},
           {"source", p.slots.source},
           {"note", p.slots.note}}}};
  if (p.slots.active_sessions_max) j["slots"]["active_sessions_max"] = p.slots.active_sessions_max;
  if (p.slots.context_gap_max) j["slots"]["context_gap_max"] = p.slots.context_gap_max;
  if (!p.note.empty()) j["note"] = p.note;
  return j;
}

}  // namespace tpmsec
