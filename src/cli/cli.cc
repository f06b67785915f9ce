#include "cli.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tpmsec/calibration/calibration.h"
#include "tpmsec/constants.h"
#include "tpmsec/emulation/command_variant.h"
#include "tpmsec/emulation/latency_model.h"
#include "tpmsec/host/file_host_state.h"
#include "tpmsec/host/files.h"

namespace tpmsec::cli {

int exit_code_for(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::kUsage:
      return kExitUsage;
    case ErrorKind::kIntegrity:
      return kExitIntegrity;
    default:
      return kExitRuntime;
  }
}

Error input_file_error(const Error& e) { return e.kind() == ErrorKind::kParse ? usage_error(e.message()) : e; }

void TpmOption::add_to(CLI::App* sub, bool state_changing) {
  changes_state = state_changing;
  sub->add_option(
      "--tpm", spec,
      "TPM to use (tpm2-tss TCTI syntax): embedded[:state=DIR], swtpm:host=H,port=P[,ctrl=P2], "
      "swtpm:path=SOCKET, mssim:host=H,port=P, device:/dev/tpmrm0, serve[:path=SOCKET] (a tpmsec server, whose "
      "own session then protects every command); swtpm: and mssim: take handles=private when "
      "the server flushes each connection's handles as it closes (tpmsec emulate --private-handles). "
      "Protection items may follow, as in TPM2TOOLS_TCTI=tpmsec:... (null-name=, ek-ca=, tofu, salt=, "
      "policy=): each counts as the flag of its name. "
      "Default, as tpm2-tools picks it: $TPMSEC_TPM, else $TPM2TOOLS_TCTI, else device:/dev/tpmrm0 "
      "when it exists (not with --emulate), else embedded");
  sub->add_option("--emulate", emulate,
                  "Put the TPM behind the latency model of a profile (data/profiles/NAME.json or a path; see "
                  "tpmsec profiles) on a virtual clock: it reports that TPM's identity and timing");
}

namespace {
std::vector<std::string>& success_notes() {
  static std::vector<std::string> notes;
  return notes;
}
}  // namespace

void note_on_success(std::string line) {
  auto& notes = success_notes();
  if (std::find(notes.begin(), notes.end(), line) == notes.end()) notes.push_back(std::move(line));
}

void print_success_notes() {
  for (const std::string& line : success_notes()) fmt::print(stderr, "{}", line);
}

Result<ChosenTpm> TpmOption::chosen_default() const {
  Result<ChosenTpm> d = chosen_tpm();
  if (d.ok() || emulate.empty()) return d;
  fmt::print(stderr,
             "tpmsec: note: ignoring TPM2TOOLS_TCTI={} (a TCTI tpmsec does not speak): --emulate {} runs on "
             "the embedded TPM\n",
             std::getenv("TPM2TOOLS_TCTI"), emulate);
  ChosenTpm embedded;
  embedded.spec = embedded.config.tpm = "embedded";
  embedded.source = TpmSource::kTpmsecTpm;
  TPMSEC_ASSIGN_OR_RETURN(embedded.parsed, parse_transport_spec(embedded.spec));
  return embedded;
}

namespace {

// The items of `d` a command does not apply: named, never dropped silently.
void note_ignored_items(const ChosenTpm& d, AppliedItems applies) {
  const bool takes_protection = applies.protection;
  const TpmConfig& c = d.config;
  std::vector<std::string> ignored;
  if (!takes_protection) {
    if (!c.null_name.empty()) ignored.push_back("null-name=");
    if (!c.ek_ca.empty()) ignored.push_back("ek-ca=");
    if (c.tofu) ignored.push_back("tofu");
    if (!c.salt.empty()) ignored.push_back("salt=");
  }
  std::vector<std::string> why;
  if (!c.policy.empty() && !applies.policy) {
    ignored.push_back("policy=");
    if (takes_protection) why.push_back("this command applies no policy");
  }
  if (!c.log.empty()) {
    ignored.push_back("log=");
    if (takes_protection) why.push_back("log= is the TCTI's own log");
  }
  if (c.strict) {
    ignored.push_back("strict");
    if (takes_protection) why.push_back("strict is the TCTI's refusal of other programs' commands");
  }
  if (ignored.empty()) return;
  if (!takes_protection) why.push_back("this command takes no protection options");
  if (d.tcti) {
    fmt::print(stderr,
               "tpmsec: note: TPM2TOOLS_TCTI names the tpmsec TCTI: this command uses its TPM {} and ignores {} ({})\n",
               d.spec, fmt::join(ignored, ", "), fmt::join(why, "; "));
  } else {
    fmt::print(stderr, "tpmsec: note: {} names the TPM {} and items: this command ignores {} ({})\n", d.origin(),
               d.spec, fmt::join(ignored, ", "), fmt::join(why, "; "));
  }
}

}  // namespace

Result<ResolvedTpm> TpmOption::resolve() const {
  ResolvedTpm out;
  if (!spec.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(out.chosen, given_tpm(spec));
    note_ignored_items(out.chosen, applies);
    out.tpm = out.chosen.spec;
    out.spec = out.chosen.parsed;
    return out;
  }
  TPMSEC_ASSIGN_OR_RETURN(out.chosen, chosen_default());
  const ChosenTpm& d = out.chosen;
  // --emulate names a chip of its own: the host's TPM behind another chip's
  // model would be neither, so only a TPM the environment names replaces the
  // embedded one there.
  if (!emulate.empty() && d.source == TpmSource::kHostDevice) {
    out.tpm = "embedded";
    TPMSEC_ASSIGN_OR_RETURN(out.spec, parse_transport_spec(out.tpm));
    return out;
  }
  note_ignored_items(d, applies);
  if (d.unnamed_simulator() && changes_state && emulate.empty()) {
    note_on_success(
        fmt::format("tpmsec: note: no TPM named (--tpm, TPMSEC_TPM, TPM2TOOLS_TCTI) and no {}: this ran "
                    "on the embedded simulator, not on a TPM of this host\n",
                    kHostTpmDevice));
  }
  out.tpm = d.spec;
  out.spec = d.parsed;
  return out;
}

const Result<ResolvedTpm>& TpmOption::resolved() const {
  if (!resolved_) resolved_.emplace(resolve());
  return *resolved_;
}

Result<std::string> TpmOption::tpm_string() const {
  const Result<ResolvedTpm>& r = resolved();
  if (!r.ok()) return r.error();
  return r->tpm;
}

Result<ChosenTpm> TpmOption::chosen() const {
  const Result<ResolvedTpm>& r = resolved();
  if (!r.ok()) return r.error();
  return r->chosen;
}

OpenTpm::OpenTpm() = default;
OpenTpm::OpenTpm(OpenTpm&&) noexcept = default;
OpenTpm& OpenTpm::operator=(OpenTpm&&) noexcept = default;

OpenTpm::~OpenTpm() {
  if (!measured || measured->profile.empty() || measured->log.size() == 0) return;
  // The same commands at the profile's means (no jitter, no tail events):
  // the figure to compare with a published mean such as Linux's 151 ms.
  std::optional<LatencyModel> calm;
  if (measured->latency_profile) calm.emplace(*measured->latency_profile, ModelOptions{std::nullopt, false, 0.0});
  double mean_ms = 0;
  for (const TraceRecord& r : measured->log.records()) {
    if (calm) mean_ms += calm->latency_ms(r.shape);
    if (list_commands) {
      fmt::print(stderr, "tpmsec:   {:<34} {:8.2f} ms\n", variant_of(r.shape),
                 static_cast<double>(r.duration_ns) / 1e6);
    }
  }
  fmt::print(stderr, "tpmsec: emulated {}: {} TPM commands took {:.2f} ms on the virtual clock{}\n", measured->profile,
             measured->log.size(), emulated_ms(),
             calm ? fmt::format(" ({:.2f} ms at the profile's means, without jitter)", mean_ms) : "");
}

namespace {

// The emulated profile's provenance warning, when it has one.
void warn_of_profile(const MeasuredTransport& measured) {
  if (!measured.warning().empty()) fmt::print(stderr, "tpmsec: warning: {}\n", measured.warning());
}

}  // namespace

Result<std::unique_ptr<MeasuredTpm>> open_measured_tpm(const TpmOption& option) {
  const Result<ResolvedTpm>& tpm = option.resolved();
  if (!tpm.ok()) return tpm.error();
  TPMSEC_ASSIGN_OR_RETURN(auto m, tpmsec::open_measured_tpm(tpm->spec, option.emulate));
  warn_of_profile(m->transport);
  return m;
}

Result<MeasuredProtectedTpm> open_measured_protected(const TpmOption& option, ProtectRequest request) {
  const Result<ResolvedTpm>& tpm = option.resolved();
  if (!tpm.ok()) return tpm.error();
  request.tpm = tpm->tpm;
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<Transport> base, open_transport(tpm->spec));
  TPMSEC_ASSIGN_OR_RETURN(std::unique_ptr<MeasuredTransport> transport,
                          MeasuredTransport::open(std::move(base), option.emulate));
  warn_of_profile(*transport);
  // Emulating, the policy is matched against the chip played: the
  // profile's identity and figures.
  ProtectOptions options;
  if (transport->latency_profile()) options.facts = facts_of(*transport->latency_profile());
  MeasuredTransport& measured = *transport;  // the ProtectedTpm owns it from here
  MeasuredProtectedTpm out;
  TPMSEC_ASSIGN_OR_RETURN(out.protect, ProtectedTpm::open(request, std::move(transport), std::move(options)));
  out.measured = measured_view(measured, out.protect->tpm(), out.protect->info());
  return out;
}

Result<OpenTpm> open_tpm(const TpmOption& option) {
  OpenTpm out;
  TPMSEC_ASSIGN_OR_RETURN(out.measured, open_measured_tpm(option));
  return out;
}

Result<OpenTpm> open_protected(const TpmOption& option, ProtectRequest request) {
  OpenTpm out;
  if (option.emulate.empty()) {
    // The protect path: no tracing, no latency model, no MeasuredTpm.
    TPMSEC_ASSIGN_OR_RETURN(out.protect, open_plain_protected(option, std::move(request)));
    return out;
  }
  TPMSEC_ASSIGN_OR_RETURN(MeasuredProtectedTpm opened, open_measured_protected(option, std::move(request)));
  out.protect = std::move(opened.protect);
  out.measured = std::move(opened.measured);
  return out;
}

double OpenTpm::emulated_ms() const {
  int64_t ns = 0;
  if (measured) {
    for (const TraceRecord& r : measured->log.records()) ns += r.duration_ns;
  }
  return static_cast<double>(ns) / 1e6;
}

const Clock* OpenTpm::clock() const { return measured ? measured->clock : &steady_clock(); }

const std::string& OpenTpm::profile() const {
  static const std::string none;
  return measured ? measured->profile : none;
}

std::string_view advice_for(ErrorReason reason) {
  switch (reason) {
    case ErrorReason::kNoTrustAnchor:
      return ". Give --ek-ca CA (the TPM's EK certificate proves its key), --null-name HEX|FILE (a pinned name, "
             "e.g. /sys/class/tpm/tpm0/null_name) or --tofu (trust the first use of each boot)";
    case ErrorReason::kUnsupportedSalt:
      return ": use --salt rsa";
    case ErrorReason::kNoEkCertificate:
      return ": anchor it with --null-name or --tofu instead";
    default:
      return "";
  }
}

Status write_file(const std::string& path, const std::string& content) {
  // Replaced through a temporary file, or written in place when standard
  // output, a device or FIFO; a link another user could have planted is
  // never followed (include/tpmsec/host/files.h).
  return files::write_output(path, content);
}

std::FILE* report_stream(const std::vector<std::string>& outputs) {
  return std::find(outputs.begin(), outputs.end(), "-") != outputs.end() ? stderr : stdout;
}

Status check_outputs(const std::vector<std::string>& paths) {
  std::vector<std::string> seen;
  for (const std::string& path : paths) {
    if (path.empty()) continue;
    // write_file()'s own decision, so what it would refuse after the run is
    // refused now (a dangling link, a directory, a planted link to a device);
    // "-" and /dev/stdout (or the file standard output goes to) are one output.
    TPMSEC_ASSIGN_OR_RETURN(files::OutputPlan plan, files::plan_output(path));
    const std::string& key = plan.identity;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return usage_error(fmt::format("{} is given for two outputs", path == "-" ? "standard output (-)" : path));
    }
    seen.push_back(key);
  }
  return ok_status();
}

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return usage_error(fmt::format("{}: no such file", path));
  if (!std::filesystem::is_regular_file(path, ec)) return usage_error(fmt::format("{}: not a regular file", path));
  auto size = std::filesystem::file_size(path, ec);
  if (ec) return usage_error(fmt::format("cannot read {}: {}", path, ec.message()));
  if (size > max_bytes) return usage_error(fmt::format("{}: larger than {} bytes", path, max_bytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) return usage_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return usage_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return text.str();
}

Result<nlohmann::json> read_json_file(const std::string& path) {
  TPMSEC_ASSIGN_OR_RETURN(std::string text, read_file(path, size_t{256} << 20));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return usage_error(fmt::format("{}: not valid JSON", path));
  return j;
}

void warn_if_interrupted(const nlohmann::json& bench, const std::string& path) {
  auto it = bench.find("interrupted");
  if (it != bench.end() && it->is_boolean() && it->get<bool>()) {
    fmt::print(stderr,
               "tpmsec: warning: {} is an interrupted run: strategies it did not reach are missing and the others "
               "rest on fewer samples\n",
               path);
  }
}

Result<uint32_t> parse_pcr_index(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos) {
    return usage_error(fmt::format("PCR index must be a decimal number, got '{}'", text));
  }
  return static_cast<uint32_t>(std::stoul(text));
}

Result<std::set<uint32_t>> parse_pcr_list(const std::string& text) {
  std::set<uint32_t> out;
  for (size_t start = 0; start <= text.size();) {
    size_t comma = std::min(text.find(',', start), text.size());
    std::string_view item = std::string_view(text).substr(start, comma - start);
    start = comma + 1;
    size_t dash = item.find('-');
    std::string first(item.substr(0, dash)), last(dash == std::string_view::npos ? first : item.substr(dash + 1));
    auto lo = parse_pcr_index(first), hi = parse_pcr_index(last);
    if (!lo.ok() || !hi.ok() || *lo > *hi || *hi > 31) {
      return usage_error(fmt::format("'{}' is not a PCR list such as 0-7,10 (PCRs 0-31)", text));
    }
    for (uint32_t pcr = *lo; pcr <= *hi; ++pcr) out.insert(pcr);
  }
  return out;
}

Result<uint16_t> parse_bank(const std::string& text) {
  auto bank = hash_from_name(text);
  if (!bank)
    return usage_error(fmt::format("unknown PCR bank '{}' (expected sha1, sha256, sha384, sha512 or sm3_256)", text));
  return *bank;
}

}  // namespace tpmsec::cli
