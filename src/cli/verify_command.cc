// tpmsec verify: does a firmware event log and/or an IMA list explain a TPM's
// PCRs, a file of expected values, or a quote's PCR digest?
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "cli.h"
#include "log_input.h"
#include "protection_options.h"
#include "tpmsec/constants.h"
#include "tpmsec/pcr.h"
#include "tpmsec/replay/verify.h"

namespace tpmsec::cli {
namespace {

using verify::PcrValues;
using verify::Verdict;

struct VerifyOptions {
  std::string eventlog;
  std::string ima;
  TpmOption tpm;
  ProtectionOptions protection;
  std::string expected;
  std::string quote;
  std::vector<std::string> banks;
  std::string pcrs;  // --pcrs: the only PCRs checked; empty: every PCR
  bool skip_bad = false;
  bool strict = false;
  std::string json;
  bool tpm_given = false;  // --tpm (its default is $TPMSEC_TPM or embedded)
};

std::string verdict_word(Verdict v) {
  switch (v) {
    case Verdict::kMatch:
      return "match";
    case Verdict::kCovered:
      return "covered";
    case Verdict::kDiffers:
      return "DIFFERS";
    case Verdict::kNotGiven:
      return "not-given";
  }
  return "?";
}

// "0-7, 10, 14-15": ascending PCRs as runs.
std::string pcr_runs(const std::set<uint32_t>& pcrs) {
  std::vector<std::string> runs;
  for (auto it = pcrs.begin(); it != pcrs.end();) {
    uint32_t first = *it, last = *it;
    while (++it != pcrs.end() && *it == last + 1) last = *it;
    runs.push_back(first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
  }
  return fmt::format("{}", fmt::join(runs, ", "));
}

// Where the PCR values come from: a TPM read through an audited session, a
// file of values, or a quote. `banks`: every bank the source holds (a TPM's
// allocated banks).
struct Source {
  PcrValues values;
  std::vector<uint16_t> banks;
  std::optional<verify::Quote> quote;
  std::optional<OpenTpm> open;
  std::unique_ptr<AuditedPcrReads> reads;
};

// --tpm: the TPM's allocated banks, read later through one audit session.
Status open_tpm_source(const VerifyOptions& o, Source& s) {
  TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o.protection.request());
  TPMSEC_ASSIGN_OR_RETURN(OpenTpm opened, open_protected(o.tpm, std::move(request)));
  s.open.emplace(std::move(opened));
  TPMSEC_ASSIGN_OR_RETURN(s.reads, s.open->protect->audited_pcr_reads());
  for (const PcrBank& b : s.open->info().pcr_banks) {
    if (!b.pcrs.empty()) s.banks.push_back(b.hash);
  }
  return ok_status();
}

// --expected: a file of values (verify.h's format), at most 1 MiB.
Status read_expected_source(const VerifyOptions& o, Source& s) {
  TPMSEC_ASSIGN_OR_RETURN(std::string text, read_file(o.expected, size_t{1} << 20));
  auto values = verify::parse_expected_values(text);
  if (!values.ok()) return input_file_error(values.error().with_context(o.expected));
  s.values = std::move(*values);
  for (const auto& [bank, pcrs] : s.values) s.banks.push_back(bank);
  return ok_status();
}

// --quote: a TPMS_ATTEST of a quote, at most 4 KiB; its banks are those it selects.
Status read_quote_source(const VerifyOptions& o, Source& s) {
  TPMSEC_ASSIGN_OR_RETURN(std::string bytes, read_file(o.quote, 4096));
  auto parsed = verify::parse_quote(as_bytes(bytes));
  if (!parsed.ok()) return input_file_error(parsed.error().with_context(o.quote));
  s.quote = std::move(*parsed);
  for (const PcrSelection& sel : s.quote->selection.banks) s.banks.push_back(sel.hash);
  return ok_status();
}

Status open_source(const VerifyOptions& o, Source& s) {
  if (o.tpm_given) return open_tpm_source(o, s);
  if (!o.expected.empty()) return read_expected_source(o, s);
  return read_quote_source(o, s);
}

// The banks to check: --bank, else every bank the source holds, so a bank no
// log mentions still has its PCRs checked (against their reset values). The
// log's banks outside them are named on stderr.
std::vector<uint16_t> choose_banks(const std::vector<uint16_t>& named, const Source& s,
                                   const event_log::EventLog* log) {
  std::vector<uint16_t> out = named.empty() ? s.banks : named;
  if (log != nullptr && named.empty()) {
    for (uint16_t b : log->banks()) {
      if (std::find(out.begin(), out.end(), b) == out.end()) {
        fmt::print(stderr, "tpmsec: note: the {} have no {} bank: the log's {} digests are not compared\n",
                   s.reads ? "TPM's allocated banks" : "values given", hash_name(b), hash_name(b));
      }
    }
  }
  return out;
}

// Reads every allocated PCR of `banks` through the audited session.
Status read_pcrs(Source& s, const std::vector<uint16_t>& banks) {
  for (uint16_t bank : banks) {
    const std::vector<PcrBank>& allocated = s.open->info().pcr_banks;
    auto it = std::find_if(allocated.begin(), allocated.end(), [&](const PcrBank& b) { return b.hash == bank; });
    if (it == allocated.end() || it->pcrs.empty()) {
      fmt::print(stderr, "tpmsec: note: the TPM has no {} bank allocated; not compared\n", hash_name(bank));
      continue;
    }
    for (uint32_t pcr : it->pcrs) {
      if (pcr >= event_log::kPcrCount) continue;
      TPMSEC_ASSIGN_OR_RETURN(s.values[bank][pcr], s.reads->read(bank, pcr));
    }
  }
  return ok_status();
}

// The chains the logs imply for `bank`. A bank the firmware log records no
// digests for is checked too: its PCRs then hold only the IMA list's extends
// and otherwise their reset values (a firmware that does not extend an
// allocated bank leaves it at those, and a value there no log explains is
// someone's extend).
Result<std::map<uint32_t, verify::Implied>> implied_for(uint16_t bank, const event_log::EventLog* log,
                                                        std::span<const ima::Entry> entries) {
  const event_log::EventLog* in_bank = log;
  if (log != nullptr) {
    std::vector<uint16_t> logged = log->banks();
    if (std::find(logged.begin(), logged.end(), bank) == logged.end()) {
      fmt::print(stderr,
                 "tpmsec: note: the firmware log records no {} digests: that bank's PCRs are checked against their "
                 "reset values{}\n",
                 hash_name(bank), entries.empty() ? "" : " and the IMA list");
      in_bank = nullptr;
    }
  }
  auto chains = verify::implied_values(in_bank, entries, bank);
  if (!chains.ok()) return input_file_error(chains.error());
  return chains;
}

// The quote's PCR digest against the log's values for its selection (a
// selected PCR no log extends holds its reset value). True when it matches.
Result<bool> report_quote(const VerifyOptions& o, const verify::Quote& quote, verify::ImpliedValues& implied,
                          const event_log::EventLog* log, std::span<const ima::Entry> entries, std::FILE* out,
                          nlohmann::json& results) {
  PcrValues values;
  std::vector<std::string> selected;
  for (const PcrSelection& s : quote.selection.banks) {
    if (!implied.count(s.hash)) {
      TPMSEC_ASSIGN_OR_RETURN(implied[s.hash], implied_for(s.hash, log, entries));
    }
    std::set<uint32_t> idx;
    for (uint32_t pcr = 0; pcr < 8 * s.select.size(); ++pcr) {
      if (!s.has(pcr)) continue;
      idx.insert(pcr);
      auto it = implied[s.hash].find(pcr);
      values[s.hash][pcr] = it != implied[s.hash].end() ? it->second.value() : verify::reset_value(s.hash, pcr, log);
    }
    selected.push_back(fmt::format("{}:{}", hash_name(s.hash), fmt::join(idx, ",")));
  }
  bool match = false;
  std::string used;
  for (uint16_t h : verify::hashes_of_size(quote.pcr_digest.size())) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes digest, verify::quote_pcr_digest(quote.selection, values, h));
    if (digest == quote.pcr_digest) {
      match = true;
      used = std::string(hash_name(h));
    }
  }
  fmt::print(out, "{:<10}{} (reset count {}, restart count {}, clock {})\n", "quote", o.quote, quote.reset_count,
             quote.restart_count, quote.clock);
  fmt::print(out, "{:<10}{}\n", "selects", fmt::join(selected, " "));
  fmt::print(out, "{:<10}{}: {}\n", "digest", to_hex(quote.pcr_digest),
             match ? fmt::format("match (the log's values, hashed with {})", used)
                   : "DIFFERS from the log's values for the selection");
  results.push_back({{"quote", o.quote}, {"pcr_digest", to_hex(quote.pcr_digest)}, {"match", match}});
  if (!match) {
    // Which PCR parts is not in a digest; say what the log gives for each.
    for (const auto& [bank, pcrs] : values) {
      for (const auto& [pcr, v] : pcrs)
        fmt::print(out, "{:<10}PCR {} {} per the log: {}\n", "", pcr, hash_name(bank), to_hex(v));
    }
  }
  return match;
}

struct Tally {
  size_t compared = 0;
  std::vector<std::string> differing;  // "PCR 23 sha256"
};

// One line per PCR the logs extend, one per bank for the PCRs at their reset
// values, and every result in `results`.
Tally report_values(const verify::ImpliedValues& implied, const PcrValues& given, bool from_tpm, std::FILE* out,
                    nlohmann::json& results) {
  Tally t;
  std::set<uint32_t> at_reset;
  auto flush = [&](uint16_t bank) {
    if (at_reset.empty()) return;
    fmt::print(out, "PCR{} {} {}: match (no log extends {}: {} reset value{})\n", at_reset.size() == 1 ? "" : "s",
               pcr_runs(at_reset), hash_name(bank), at_reset.size() == 1 ? "it" : "them",
               at_reset.size() == 1 ? "its" : "their", at_reset.size() == 1 ? "" : "s");
    at_reset.clear();
  };
  std::vector<verify::PcrResult> all = verify::compare(implied, given);
  for (size_t i = 0; i < all.size(); ++i) {
    const verify::PcrResult& r = all[i];
    if (r.verdict != Verdict::kNotGiven) ++t.compared;
    if (r.verdict == Verdict::kMatch && r.events == 0) {
      at_reset.insert(r.pcr);
    } else {
      fmt::print(out, "{}\n", r.message);
    }
    if (r.verdict == Verdict::kDiffers) {
      fmt::print(out, "    {:<6}{}\n    {:<6}{}\n", "log", to_hex(r.expected), from_tpm ? "TPM" : "file",
                 to_hex(r.actual));
      t.differing.push_back(fmt::format("PCR {} {}", r.pcr, hash_name(r.bank)));
    }
    if (i + 1 == all.size() || all[i + 1].bank != r.bank) flush(r.bank);
    results.push_back({{"bank", hash_name(r.bank)},
                       {"pcr", r.pcr},
                       {"verdict", verdict_word(r.verdict)},
                       {"events", r.events},
                       {"covered", r.covered},
                       {"first_apart", r.first_apart},
                       {"log", to_hex(r.expected)},
                       {"given", to_hex(r.actual)}});
  }
  return t;
}

// --pcrs: every other PCR is left out, and the report says which.
void keep_only(const std::set<uint32_t>& pcrs, verify::ImpliedValues& implied, std::FILE* out) {
  std::set<uint32_t> left_out;
  for (auto& [bank, chains] : implied) {
    std::erase_if(chains, [&](const auto& kv) {
      if (pcrs.count(kv.first)) return false;
      left_out.insert(kv.first);
      return true;
    });
  }
  if (!left_out.empty())
    fmt::print(out, "PCR{} {}: not checked (--pcrs)\n", left_out.size() == 1 ? "" : "s", pcr_runs(left_out));
}

Status check_arguments(const VerifyOptions& o) {
  int sources = int{o.tpm_given} + int{!o.expected.empty()} + int{!o.quote.empty()};
  if (o.eventlog.empty() && o.ima.empty()) return usage_error("give a log: --eventlog FILE and/or --ima FILE");
  if (sources != 1) return usage_error("give one source of PCR values: --tpm T, --expected FILE or --quote FILE");
  if (!o.tpm.emulate.empty()) return usage_error("verify reads a real TPM's PCRs; --emulate has nothing to verify");
  if (o.protection.unsalted) {
    return usage_error(
        "verify trusts only PCR values a salted audit session authenticated; --unsalted would let an "
        "interposer forge them");
  }
  if (!o.pcrs.empty() && !o.quote.empty()) {
    return usage_error("--pcrs does not apply to --quote: the quote's digest covers every PCR it selects");
  }
  return ok_status();
}

// What --bank and --pcrs name: the banks (none: every bank of the source)
// and the only PCRs checked (none: every PCR).
struct VerifySelection {
  std::vector<uint16_t> banks;
  std::optional<std::set<uint32_t>> only;
};

Result<VerifySelection> parse_verify_selection(const VerifyOptions& o) {
  VerifySelection sel;
  for (const std::string& b : o.banks) {
    TPMSEC_ASSIGN_OR_RETURN(uint16_t bank, parse_bank(b));
    sel.banks.push_back(bank);
  }
  if (!o.pcrs.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(sel.only, parse_pcr_list(o.pcrs));
  }
  return sel;
}

// The firmware log (--eventlog), whole since boot; none without it.
Result<std::optional<event_log::EventLog>> read_verify_eventlog(const VerifyOptions& o) {
  if (o.eventlog.empty()) return std::optional<event_log::EventLog>();
  TPMSEC_ASSIGN_OR_RETURN(event_log::EventLog parsed, load_event_log(o.eventlog));
  return std::optional<event_log::EventLog>(std::move(parsed));
}

// The IMA list's entries (--ima); the entries --skip-bad drops are named on stderr.
Result<std::vector<ima::Entry>> read_verify_ima(const VerifyOptions& o) {
  if (o.ima.empty()) return std::vector<ima::Entry>();
  // The digests the workload computes are not needed: parse for the entries.
  TPMSEC_ASSIGN_OR_RETURN(ImaWorkload w, load_ima_workload(o.ima, alg::kSha1, o.skip_bad, o.strict));
  for (const ima::Problem& p : w.problems) fmt::print(stderr, "tpmsec: {}: {} (skipped)\n", o.ima, p.error.message());
  return std::move(w.kept);
}

// The logs' values against the source's: the quote's digest, or every PCR
// given (one no log extends must hold its reset value), each printed to
// `out` and added to `results`.
Result<Tally> compare_verify_source(const VerifyOptions& o, Source& source, verify::ImpliedValues& implied,
                                    const VerifySelection& sel, const event_log::EventLog* log,
                                    std::span<const ima::Entry> entries, std::FILE* out, nlohmann::json& results) {
  Tally tally;
  if (source.quote) {
    TPMSEC_ASSIGN_OR_RETURN(bool match, report_quote(o, *source.quote, implied, log, entries, out, results));
    tally.compared = 1;
    if (!match) tally.differing.push_back("the quote's PCR digest");
    return tally;
  }
  verify::add_unextended(implied, source.values, log);
  if (sel.only) keep_only(*sel.only, implied, out);
  return report_values(implied, source.values, source.reads != nullptr, out, results);
}

// --json: the results as tpmsec-verify/1.
Status write_verify_json(const VerifyOptions& o, const Source& source, const nlohmann::json& results,
                         const Tally& tally) {
  nlohmann::json j = {{"schema", "tpmsec-verify/1"},
                      {"eventlog", o.eventlog},
                      {"ima", o.ima},
                      {"source", source.reads   ? "tpm"
                                 : source.quote ? "quote"
                                                : "expected"},
                      {"results", results},
                      {"match", tally.differing.empty() && tally.compared > 0}};
  return write_file(o.json, j.dump(2) + "\n");
}

Status run_verify(const VerifyOptions& o) {
  TPMSEC_RETURN_IF_ERROR(check_arguments(o));
  TPMSEC_ASSIGN_OR_RETURN(VerifySelection sel, parse_verify_selection(o));
  Source source;
  TPMSEC_RETURN_IF_ERROR(open_source(o, source));
  TPMSEC_ASSIGN_OR_RETURN(std::optional<event_log::EventLog> log, read_verify_eventlog(o));
  const event_log::EventLog* lp = log ? &*log : nullptr;
  std::vector<uint16_t> banks = choose_banks(sel.banks, source, lp);
  if (banks.empty()) return usage_error("no bank to compare (--bank)");

  // A live check reads every PCR of those banks first and the IMA list
  // after: a list that grew in between holds the PCR's value at an earlier
  // entry (verify.h), while a list read first could be behind the PCR.
  if (source.reads) TPMSEC_RETURN_IF_ERROR(read_pcrs(source, banks));
  TPMSEC_ASSIGN_OR_RETURN(std::vector<ima::Entry> entries, read_verify_ima(o));

  verify::ImpliedValues implied;
  for (uint16_t bank : banks) {
    TPMSEC_ASSIGN_OR_RETURN(implied[bank], implied_for(bank, lp, entries));
  }
  std::FILE* out = report_stream({o.json});
  nlohmann::json results = nlohmann::json::array();
  TPMSEC_ASSIGN_OR_RETURN(Tally tally, compare_verify_source(o, source, implied, sel, lp, entries, out, results));
  if (!o.json.empty()) TPMSEC_RETURN_IF_ERROR(write_verify_json(o, source, results, tally));
  if (!tally.differing.empty()) {
    return integrity_error(fmt::format("the logs do not explain {} (above)", fmt::join(tally.differing, ", ")));
  }
  if (tally.compared == 0) return usage_error("no PCR of the log is among the values given: nothing was compared");
  return ok_status();
}

}  // namespace

void register_verify(CLI::App& app, Action* action) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* sub = app.add_subcommand(
      "verify",
      "Check that a firmware event log and/or an IMA list explain a TPM's PCRs (read through an audited session), a "
      "file of expected values, or a quote's PCR digest; exit 3 naming where they part");
  sub->add_option("--eventlog", o->eventlog,
                  "TCG firmware event log (/sys/kernel/security/tpm0/binary_bios_measurements)");
  sub->add_option("--ima", o->ima,
                  "IMA list, ascii or binary, classic or per-bank (/sys/kernel/security/ima/"
                  "ascii_runtime_measurements); read after the PCRs, so a list that grew since still verifies");
  o->tpm.add_to(sub);
  o->protection.add_to(sub, o->tpm);
  sub->add_option("--expected", o->expected,
                  "Expected values instead of a TPM: tpm2_pcrread's YAML, or JSON {\"sha256\": {\"0\": \"hex\", …}}");
  sub->add_option("--quote", o->quote,
                  "A quote's TPMS_ATTEST (tpm2_quote -m): its PCR digest is checked against the log's values for its "
                  "selection (the signature is not: check it with tpm2_checkquote)");
  sub->add_option("--bank", o->banks,
                  "Banks to compare (sha1, sha256, sha384, sha512, sm3_256); default: every bank of the TPM, the file "
                  "or the quote")
      ->delimiter(',');
  sub->add_option("--pcrs", o->pcrs,
                  "Check only these PCRs (0-7,10). Default: every PCR given, and one no log extends must hold its "
                  "reset value");
  sub->add_flag("--skip-bad", o->skip_bad, "IMA: leave out malformed entries (each is reported) instead of stopping");
  sub->add_flag("--strict", o->strict, "Refuse an IMA list that ends in a partial entry (default: a warning)");
  sub->add_option("--json", o->json, "Write the result as JSON (schema tpmsec-verify/1)");
  sub->callback([o, action, sub] {
    o->tpm_given = sub->get_option("--tpm")->count() > 0;
    *action = [o]() -> Status {
      TPMSEC_RETURN_IF_ERROR(check_outputs({o->json}));
      return run_verify(*o);
    };
  });
}

}  // namespace tpmsec::cli
