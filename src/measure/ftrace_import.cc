// From function_graph call trees to a bench result: which TPM command each
// tpm_transmit_cmd was, and which strategy each tpm2_pcr_extend used.
#include "tpmsec/measure/ftrace_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tpmsec/commands.h"

namespace tpmsec {
namespace {

// The function's name without compiler suffixes ("tpm2_pcr_extend.isra.0").
std::string_view base_name(const FtraceCall& c) {
  std::string_view n = c.function;
  return n.substr(0, n.find('.'));
}
bool named(const FtraceCall& c, std::string_view name) { return base_name(c) == name; }
bool is_transmit(const FtraceCall& c) { return named(c, "tpm_transmit_cmd") || named(c, "tpm_transmit"); }

// The command a kernel TPM function sends (drivers/char/tpm/tpm2-cmd.c).
struct KnownFunction {
  std::string_view function;
  uint32_t command_code;
};
constexpr KnownFunction kKnownFunctions[] = {
    {"tpm2_pcr_extend", cmd::PcrExtend::kInfo.code},
    {"tpm2_pcr_read", cmd::PcrRead::kInfo.code},
    {"tpm2_get_random", cmd::GetRandom::kInfo.code},
    {"tpm2_flush_context", cmd::FlushContext::kInfo.code},
    {"tpm2_load_context", cmd::ContextLoad::kInfo.code},
    {"tpm2_save_context", cmd::ContextSave::kInfo.code},
    {"tpm2_get_tpm_pt", cmd::GetCapability::kInfo.code},
    {"tpm2_get_pcr_allocation", cmd::GetCapability::kInfo.code},
    {"tpm2_get_cc_attrs_tbl", cmd::GetCapability::kInfo.code},
    {"tpm2_create_primary", cmd::CreatePrimary::kInfo.code},
    {"tpm2_startup", cmd::Startup::kInfo.code},
    {"tpm2_shutdown", cmd::Shutdown::kInfo.code},
};

uint32_t code_of(std::string_view function) {
  for (const auto& k : kKnownFunctions) {
    if (k.function == function) return k.command_code;
  }
  return 0;
}

struct Command {
  TraceRecord record;     // shape and duration; start_ns relative to the operation's start
  std::string primitive;  // the bench primitive it is a sample of
};

// What one top-level TPM operation (an extend, a get_random, ...) sent.
struct Operation {
  const FtraceCall* call = nullptr;
  bool extend = false;
  bool session_started = false;  // tpm2_start_auth_session ran and sent commands
  bool session_kept = false;     // tpm2_start_auth_session ran and sent nothing: the session was active
  bool resident_start = false;   // session_started in a capture whose kernel keeps its session
  bool hmac_helpers = false;     // tpm_buf_fill_hmac_session / tpm_buf_check_hmac_response ran
  std::vector<Command> commands;
  std::vector<std::string> owners;  // per command: the TPM function whose transmit it was
};

Command command(uint32_t code, double offset_us, double us) {
  Command c;
  c.record.shape.command_code = code;
  c.record.start_ns = std::llround(offset_us * 1e3);
  c.record.duration_ns = std::llround(us * 1e3);
  return c;
}

// Linux's tpm2_start_auth_session: ContextLoad of the null key, a salted
// StartAuthSession (ECC P-256, as Linux), FlushContext of the null key.
void label_session_start(std::vector<Command>& cmds, size_t first) {
  size_t n = cmds.size() - first;
  if (n != 3 && n != 1) return;  // not the kernel's sequence: left as the transmits of an unknown function
  auto& sas = cmds[n == 3 ? first + 1 : first];
  sas.record.shape.command_code = cmd::StartAuthSession::kInfo.code;
  sas.record.shape.salted = true;
  sas.record.shape.encrypted_salt_bytes = 68;  // TPM2B_ECC_POINT of P-256: 2 + 32 + 2 + 32
  sas.primitive = fmt::format("{} (ECC salt)", cmd::StartAuthSession::kInfo.name);
  if (n == 3) {
    auto& load = cmds[first].record.shape;
    load.command_code = cmd::ContextLoad::kInfo.code;
    load.context_handle = 0x80000000;  // a transient object: the null key
    cmds[first].primitive = fmt::format("{} (null key)", cmd::ContextLoad::kInfo.name);
    cmds[first + 2].record.shape.command_code = cmd::FlushContext::kInfo.code;
    cmds[first + 2].record.shape.context_handle = 0x80000000;
    cmds[first + 2].primitive = std::string(cmd::FlushContext::kInfo.name);
  }
}

// Walks `c` (starting `offset_us` into the operation): children run one after
// the other from their parent's start (function_graph gives durations, not
// start times; host time the children do not account for is left at the end).
void walk(const FtraceCall& c, double offset_us, const std::string& owner, Operation& op) {
  if (is_transmit(c)) {
    Command cmd = command(code_of(owner), offset_us, c.duration_us);
    if (cmd.record.shape.command_code != 0) {
      cmd.primitive = command_name(cmd.record.shape.command_code);
    } else {
      bool caller_known = owner != base_name(c);  // a transmit at the top level has no TPM function around it
      cmd.primitive = fmt::format("tpm_transmit_cmd ({})", caller_known ? owner : "caller unknown");
    }
    op.commands.push_back(std::move(cmd));
    op.owners.push_back(owner);
    return;
  }
  std::string_view name = base_name(c);
  if (name == "tpm_buf_fill_hmac_session" || name == "tpm_buf_check_hmac_response") op.hmac_helpers = true;
  bool session_start = name == "tpm2_start_auth_session";
  size_t first = op.commands.size();
  std::string child_owner = name.substr(0, 5) == "tpm2_" ? std::string(name) : owner;
  double child_offset = offset_us;
  for (const auto& child : c.children) {
    walk(child, child_offset, child_owner, op);
    child_offset += child.duration_us;
  }
  // A tpm2_start_auth_session that sent nothing found the session already
  // active (Linux 6.12.y: chip->auth kept across extends): resident.
  if (session_start && op.commands.size() == first) op.session_kept = true;
  if (session_start && op.commands.size() > first) {
    op.session_started = true;
    label_session_start(op.commands, first);
  }
}

// The transmits the operation's function sent itself (not through a helper)
// are its own command: for tpm2_pcr_extend the last one is PCR_Extend. They
// carry an HMAC session when a session was started or the HMAC helpers ran.
void label_own_commands(Operation& op) {
  std::string own(base_name(*op.call));
  bool hmac = op.session_started || op.hmac_helpers;
  bool last = true;
  for (size_t i = op.commands.size(); i-- > 0;) {
    if (op.owners[i] != own) continue;
    auto& c = op.commands[i];
    if (op.extend && !last) {  // nothing in Linux sends these; a patched kernel might
      c.record.shape.command_code = 0;
      c.primitive = "tpm_transmit_cmd (tpm2_pcr_extend)";
      continue;
    }
    last = false;
    if (c.record.shape.command_code == 0) continue;
    c.record.shape.hmac_session = hmac;
    c.record.shape.session_count = 1;
    if (c.record.shape.command_code == cmd::PcrExtend::kInfo.code) {
      c.primitive = fmt::format("{} ({})", cmd::PcrExtend::kInfo.name, hmac ? "HMAC session" : "password");
    } else if (hmac) {
      c.primitive += " (HMAC session)";
    }
  }
}

// Finds the TPM operations in a call tree: tpm2_pcr_extend anywhere, and any
// other tpm2_* function (or bare transmit) that sends commands.
void find_operations(const FtraceCall& c, std::vector<Operation>& ops) {
  std::string_view name = base_name(c);
  if (name == "tpm2_pcr_extend" || name.substr(0, 5) == "tpm2_" || is_transmit(c)) {
    Operation op;
    op.call = &c;
    op.extend = name == "tpm2_pcr_extend";
    walk(c, 0, std::string(name), op);
    if (op.commands.empty()) return;
    label_own_commands(op);
    ops.push_back(std::move(op));
    return;
  }
  for (const auto& child : c.children) find_operations(child, ops);
}

StrategyKind strategy_of(const Operation& op) {
  if (op.resident_start) return StrategyKind::kResident;
  if (op.session_started) return StrategyKind::kPerCommand;
  if (op.hmac_helpers) return StrategyKind::kResident;
  return StrategyKind::kPlain;
}

nlohmann::json imported_identity(const FtraceImportOptions& options, const std::vector<std::string>& origins,
                                 bool ecc) {
  const std::string& label = options.label;
  return {{"manufacturer", options.manufacturer},  // not in the capture: what the user says
          {"manufacturer_raw", ""},
          {"vendor", ""},
          {"vendor_strings", {"", "", "", ""}},
          {"firmware_version", ""},
          {"spec", {{"family", ""}, {"revision", ""}}},
          {"pcr_banks", nlohmann::json::array()},
          {"ecc_p256", ecc},
          {"rsa_2048", false},
          {"max_loaded_sessions", 0},
          {"max_transient_objects", 0},
          {"emulated", false},
          {"imported", "ftrace"},
          {"label", label.empty() ? "unknown TPM" : label},
          {"captures", origins}};
}

// A kernel that keeps its session (an extend whose tpm2_start_auth_session sent
// nothing) started it once: in a trace from boot (bench/kernel/run
// --trace-boot) the extend that sent ContextLoad, StartAuthSession and
// FlushContext is the resident session's first extend (the IMA boot
// aggregate's), not a session per extend. Per capture, from `first` on.
void mark_resident_starts(std::vector<Operation>& ops, size_t first) {
  bool kept = std::any_of(ops.begin() + static_cast<std::ptrdiff_t>(first), ops.end(),
                          [](const Operation& op) { return op.extend && op.session_kept; });
  if (!kept) return;
  for (size_t i = first; i < ops.size(); ++i) ops[i].resident_start = ops[i].extend && ops[i].session_started;
}

// The operations of every capture, in order; an error for a capture with none.
Status collect_operations(const std::vector<FtraceCapture>& captures, std::vector<std::string>& origins,
                          std::vector<Operation>& ops) {
  for (const auto& capture : captures) {
    origins.push_back(capture.origin);
    size_t before = ops.size();
    for (const auto& call : capture.calls) find_operations(call, ops);
    if (ops.size() == before) {
      return parse_error(fmt::format("{}: no TPM commands (tpm_transmit_cmd) in the capture", capture.origin));
    }
    mark_resident_starts(ops, before);
  }
  return ok_status();
}

// The operations laid on one timeline: each command a sample of its
// primitive (in first-seen order), each PCR extend a sample of the strategy
// its commands show.
struct Timeline {
  std::map<std::string, PrimitiveResult> primitives;
  std::vector<std::string> primitive_order;
  std::map<StrategyKind, StrategyResult> strategies;
  bool ecc = false;  // an ECC-salted session was started
};

// A timeline: each operation at its abstime when the capture has one,
// else right after the latest one so far.
Timeline timeline_of(const std::vector<Operation>& ops) {
  Timeline t;
  int64_t clock_ns = 0;
  for (const auto& op : ops) {
    int64_t start = op.call->start_s ? static_cast<int64_t>(std::llround(*op.call->start_s * 1e9)) : clock_ns;
    Sample sample;
    sample.start_ns = start;
    sample.total_ms = op.call->duration_us / 1e3;
    for (const auto& cmd : op.commands) {
      TraceRecord rec = cmd.record;
      rec.start_ns += start;
      sample.commands.push_back(rec);
      double ms = static_cast<double>(rec.duration_ns) / 1e6;
      sample.tpm_ms += ms;
      t.ecc |= rec.shape.command_code == cmd::StartAuthSession::kInfo.code;
      if (!t.primitives.count(cmd.primitive)) {
        t.primitive_order.push_back(cmd.primitive);
        t.primitives[cmd.primitive].name = cmd.primitive;
      }
      Sample one;
      one.start_ns = rec.start_ns;
      one.total_ms = one.tpm_ms = ms;
      one.commands = {rec};
      t.primitives[cmd.primitive].samples.push_back(std::move(one));
    }
    sample.host_ms = std::max(0.0, sample.total_ms - sample.tpm_ms);
    clock_ns = std::max(clock_ns, start + static_cast<int64_t>(std::llround(op.call->duration_us * 1e3)));
    if (op.extend) {
      StrategyResult& s = t.strategies[strategy_of(op)];
      s.kind = strategy_of(op);
      s.extends.push_back(std::move(sample));
    }
  }
  return t;
}

// The timeline's primitives and strategies summarized into `r`.
void summarize_into(Timeline& t, BenchResult& r) {
  for (const auto& name : t.primitive_order) {
    PrimitiveResult p = std::move(t.primitives[name]);
    std::vector<double> ms;
    for (const auto& s : p.samples) ms.push_back(s.tpm_ms);
    p.tpm_ms = summarize(ms);  // host time around a single command is not in the capture: host_us stays empty
    r.primitives.push_back(std::move(p));
  }
  int most = 0;
  for (StrategyKind kind : all_strategies()) {
    auto it = t.strategies.find(kind);
    if (it == t.strategies.end()) continue;
    StrategyResult s = std::move(it->second);
    std::vector<double> total, host;
    double commands = 0;
    for (const auto& e : s.extends) {
      total.push_back(e.total_ms);
      host.push_back(e.host_ms * 1000.0);
      commands += static_cast<double>(e.commands.size());
    }
    s.per_extend_ms = summarize(total);
    s.host_us = summarize(host);
    s.first_extend_ms = s.extends.front().total_ms;
    s.first_extend_commands = s.extends.front().commands.size();
    s.tpm_commands_per_extend = commands / static_cast<double>(s.extends.size());
    most = std::max(most, static_cast<int>(s.extends.size()));
    r.strategies.push_back(std::move(s));
  }
  r.options.iterations = most;
  r.options.strategies.clear();
  for (const auto& s : r.strategies) r.options.strategies.push_back(s.kind);
}

}  // namespace

Result<BenchResult> bench_from_ftrace(const std::vector<FtraceCapture>& captures, const FtraceImportOptions& options) {
  if (options.manufacturer.size() > 4 || !std::all_of(options.manufacturer.begin(), options.manufacturer.end(),
                                                      [](char c) { return c > 0x20 && c < 0x7f; })) {
    return usage_error(fmt::format("manufacturer '{}': at most 4 printable characters, as TPM_PT_MANUFACTURER (IFX)",
                                   options.manufacturer));
  }
  std::vector<std::string> origins;
  std::vector<Operation> ops;
  TPMSEC_RETURN_IF_ERROR(collect_operations(captures, origins, ops));

  BenchResult r;
  r.clock = "ftrace";
  r.transport = "ftrace";
  for (const auto& o : origins) r.transport += (r.transport == "ftrace" ? ":" : ",") + o;
  r.date = options.date.empty() ? utc_timestamp() : options.date;
  r.version = TPMSEC_VERSION;
  r.options.pcr = 0;  // function_graph shows no arguments: PCR and bank are unknown
  r.options.bank = 0;
  r.options.checkpoint_every = 0;

  Timeline t = timeline_of(ops);
  summarize_into(t, r);
  r.tpm = imported_identity(options, origins, t.ecc);
  rate_strategies(r);
  return r;
}

}  // namespace tpmsec
