// The function_graph text format (Documentation/trace/ftrace.rst, "function
// graph tracer"), line by line:
//
//   [ABSTIME |] CPU) [TASK-PID |] [MARKER] DURATION UNIT | INDENT CALL
//
// where CALL is "func() {", "func();" or "}" (a trailing /* comment */, as
// funcgraph-tail and funcgraph-retval print, is dropped). Header comments,
// context-switch separators and interrupt arrows carry no calls and are
// skipped; anything else that is not this shape is an error naming the line.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "tpmsec/measure/ftrace_import.h"

namespace tpmsec {
namespace {

constexpr size_t kMaxDepth = 256;
constexpr double kMaxDurationUs = 1e12;  // 11.6 days: anything longer is not a TPM command

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Tabs, carriage returns and no-break spaces (a capture pasted from mail)
// become plain spaces.
std::string normalize(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\xC2' && i + 1 < raw.size() && raw[i + 1] == '\xA0') {
      out += ' ';
      ++i;
    } else if (raw[i] == '\t' || raw[i] == '\r') {
      out += ' ';
    } else {
      out += raw[i];
    }
  }
  return out;
}

// The line as an error quotes it: printable, at most 60 characters.
std::string excerpt(std::string_view line) {
  std::string out;
  for (char c : trim(line).substr(0, 60)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (trim(line).size() > 60) out += "...";
  return out;
}

// A non-negative decimal number ("36976.99"), all of `s`.
std::optional<double> parse_number(std::string_view s) {
  if (s.empty() || s.size() > 32 || s.find_first_not_of("0123456789.") != std::string_view::npos) return {};
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return {};
  return v;
}

// The duration column: empty (an opening line), or an optional overhead
// marker, a number and a unit. nullopt inside: not a duration at all.
struct Duration {
  bool present = false;
  double us = 0;
};
std::optional<Duration> parse_duration(std::string_view field) {
  field = trim(field);
  if (field.empty()) return Duration{};
  if (std::string_view("+!#*@$").find(field.front()) != std::string_view::npos) field = trim(field.substr(1));
  size_t unit_at = field.find_first_not_of("0123456789.");
  if (unit_at == std::string_view::npos || unit_at == 0) return {};
  auto number = parse_number(field.substr(0, unit_at));
  std::string_view unit = trim(field.substr(unit_at));
  double scale = unit == "us" ? 1 : unit == "ms" ? 1e3 : unit == "s" ? 1e6 : unit == "ns" ? 1e-3 : -1;
  if (!number || scale < 0) return {};
  double us = *number * scale;
  if (us > kMaxDurationUs) return {};
  return Duration{true, us};
}

bool valid_function_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '$';
  });
}

class Parser {
 public:
  explicit Parser(std::string origin) { capture_.origin = std::move(origin); }

  Status line(std::string_view raw, size_t number) {
    std::string normalized = normalize(raw);
    std::string_view s = trim(normalized);
    line_ = number;
    text_ = s;
    if (s.empty() || s.front() == '#') return ok_status();
    if (s.find_first_not_of('-') == std::string_view::npos) return ok_status();  // context-switch separator

    // Optional abstime column: "2353.411224 |" before the CPU column.
    std::optional<double> abstime;
    size_t bar = s.find('|'), paren = s.find(')');
    if (bar != std::string_view::npos && (paren == std::string_view::npos || bar < paren)) {
      abstime = parse_number(trim(s.substr(0, bar)));
      if (!abstime) return fail("expected a timestamp or the CPU column ('0)')");
      s = trim(s.substr(bar + 1));
    }
    // The CPU column: "0)".
    size_t digits = s.find_first_not_of("0123456789");
    if (digits == 0 || digits == std::string_view::npos || digits > 5 || s[digits] != ')') {
      return fail("expected the CPU column ('0)')");
    }
    int cpu = std::stoi(std::string(s.substr(0, digits)));
    s = s.substr(digits + 1);
    if (s.find('|') == std::string_view::npos && s.find("=>") != std::string_view::npos) {
      return ok_status();  // funcgraph-proc context switch: "bash-1234 => kworker-56"
    }
    if (s.find("==========>") != std::string_view::npos || s.find("<==========") != std::string_view::npos) {
      return ok_status();  // funcgraph-irqs: entering or leaving an interrupt
    }

    // [TASK-PID |] DURATION | CALL
    bar = s.find('|');
    if (bar == std::string_view::npos) return fail("expected 'DURATION |  FUNCTION CALL'");
    auto duration = parse_duration(s.substr(0, bar));
    s = s.substr(bar + 1);
    if (!duration) {  // the first column was the task: the duration follows
      bar = s.find('|');
      if (bar == std::string_view::npos || !(duration = parse_duration(s.substr(0, bar)))) {
        return fail("expected a duration ('6360.029 us')");
      }
      s = s.substr(bar + 1);
    }
    std::string_view call = trim(s);
    if (ends_with(call, "*/")) {
      size_t open = call.rfind("/*");
      if (open == std::string_view::npos) return fail("unterminated comment");
      call = trim(call.substr(0, open));
    }
    if (call.empty()) return ok_status();  // a trace_printk or marker comment
    if (call == "}") return close(cpu, *duration);
    if (ends_with(call, "() {")) return open(cpu, trim(call.substr(0, call.size() - 4)), abstime);
    if (ends_with(call, "();")) return leaf(cpu, trim(call.substr(0, call.size() - 3)), *duration, abstime);
    return fail("expected 'func() {', 'func();' or '}'");
  }

  Result<FtraceCapture> finish() {
    for (const auto& [cpu, stack] : open_) {
      if (!stack.empty()) {
        return parse_error(fmt::format("{}:{}: {}() {{ on CPU {} is never closed (a truncated capture?)",
                                       capture_.origin, stack.back().line, stack.back().function, cpu));
      }
    }
    // Calls on different CPUs close out of order: list them as they started.
    std::stable_sort(capture_.calls.begin(), capture_.calls.end(),
                     [](const FtraceCall& a, const FtraceCall& b) { return a.line < b.line; });
    return std::move(capture_);
  }

 private:
  Status fail(const std::string& what) const {
    return parse_error(fmt::format("{}:{}: {} (got '{}')", capture_.origin, line_, what, excerpt(text_)));
  }

  Status open(int cpu, std::string_view name, std::optional<double> abstime) {
    if (!valid_function_name(name)) return fail("bad function name");
    auto& stack = open_[cpu];
    if (stack.size() >= kMaxDepth) return fail(fmt::format("calls nested deeper than {}", kMaxDepth));
    FtraceCall c;
    c.function = std::string(name);
    c.cpu = cpu;
    c.line = line_;
    c.start_s = abstime;
    stack.push_back(std::move(c));
    return ok_status();
  }

  Status leaf(int cpu, std::string_view name, Duration d, std::optional<double> abstime) {
    if (!valid_function_name(name)) return fail("bad function name");
    if (!d.present) return fail("a leaf call without a duration");
    FtraceCall c;
    c.function = std::string(name);
    c.cpu = cpu;
    c.line = line_;
    c.duration_us = d.us;
    c.start_s = abstime;
    attach(cpu, std::move(c));
    return ok_status();
  }

  Status close(int cpu, Duration d) {
    auto& stack = open_[cpu];
    if (stack.empty()) return fail(fmt::format("'}}' closes no call open on CPU {}", cpu));
    if (!d.present) return fail("a closing '}' without a duration");
    FtraceCall c = std::move(stack.back());
    stack.pop_back();
    c.duration_us = d.us;
    attach(cpu, std::move(c));
    return ok_status();
  }

  void attach(int cpu, FtraceCall c) {
    auto& stack = open_[cpu];
    if (stack.empty()) {
      capture_.calls.push_back(std::move(c));
    } else {
      stack.back().children.push_back(std::move(c));
    }
  }

  FtraceCapture capture_;
  std::map<int, std::vector<FtraceCall>> open_;  // per CPU, the calls still open
  size_t line_ = 0;
  std::string_view text_;
};

}  // namespace

Result<FtraceCapture> parse_function_graph(std::string_view text, const std::string& origin) {
  Parser parser(origin);
  size_t number = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    TPMSEC_RETURN_IF_ERROR(parser.line(line, ++number));
  }
  return parser.finish();
}

}  // namespace tpmsec
