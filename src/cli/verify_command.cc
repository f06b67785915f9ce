// tpmsec verify: does a firmware event log and/or an IMA list explain a TPM's
// PCRs, a file of expected values, or a quote's PCR digest?
#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "log_input.h"
#include "protection_options.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
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
  bool skip_bad = false;
  bool strict = false;
  std::string json;
  bool tpm_given = false;  // --tpm (its default is $TPMSEC_TPM or embedded)
};

// PCRs 17-22 start at all ones on a PC Client TPM (TPM2_Startup(CLEAR) resets
// the locality-restricted DRTM PCRs to -1; PC Client Platform TPM Profile,
// PCR attributes): the value of a PCR no log extends.
Bytes untouched_value(uint16_t bank, uint32_t pcr, const event_log::EventLog* log) {
  Bytes v(*digest_size(bank), pcr >= 17 && pcr <= 22 ? 0xff : 0x00);
  if (pcr == 0 && log != nullptr) v.back() = log->pcr0_locality();
  return v;
}

std::string verdict_word(Verdict v) {
  switch (v) {
    case Verdict::kMatch: return "match";
    case Verdict::kCovered: return "covered";
    case Verdict::kDiffers: return "DIFFERS";
    case Verdict::kNotGiven: return "not-given";
  }
  return "?";
}

// The banks to check: --bank, else the firmware log's (those tpmsec hashes),
// else those of the values given, else sha256.
std::vector<uint16_t> choose_banks(const VerifyOptions& o, const event_log::EventLog* log,
                                   const std::vector<uint16_t>& given, std::vector<uint16_t> named) {
  if (!named.empty()) return named;
  std::vector<uint16_t> out;
  if (log != nullptr) {
    for (uint16_t b : log->banks()) {
      if (crypto::hash(b, {}).ok()) out.push_back(b);
    }
  } else {
    out = given;
  }
  if (!given.empty() && o.expected.empty() == false) {
    // A file of values: only the banks it holds can be compared.
    std::erase_if(out, [&](uint16_t b) { return std::find(given.begin(), given.end(), b) == given.end(); });
  }
  if (out.empty() && log == nullptr) out.push_back(alg::kSha256);
  return out;
}

Status run_verify(const VerifyOptions& o) {
  int sources = int{o.tpm_given} + int{!o.expected.empty()} + int{!o.quote.empty()};
  if (o.eventlog.empty() && o.ima.empty()) return usage_error("give a log: --eventlog FILE and/or --ima FILE");
  if (sources != 1) return usage_error("give one source of PCR values: --tpm T, --expected FILE or --quote FILE");
  if (!o.tpm.emulate.empty()) return usage_error("verify reads a real TPM's PCRs; --emulate has nothing to verify");
  if (o.protection.unsalted) {
    return usage_error("verify trusts only PCR values a salted audit session authenticated; --unsalted would let an "
                       "interposer forge them");
  }
  std::vector<uint16_t> named;
  for (const std::string& b : o.banks) {
    TPMSEC_ASSIGN_OR_RETURN(uint16_t bank, parse_bank(b));
    named.push_back(bank);
  }

  // A live check reads the PCRs first and the logs after: a list that grew in
  // between then holds the PCR's value at an earlier entry (verify.h).
  PcrValues given;
  std::optional<verify::Quote> quote;
  std::optional<OpenTpm> open;
  std::unique_ptr<ProtectedTpm> protect;
  std::unique_ptr<AuditedPcrReads> reads;
  if (o.tpm_given) {
    TPMSEC_ASSIGN_OR_RETURN(ProtectRequest request, o.protection.request());
    TPMSEC_ASSIGN_OR_RETURN(OpenTpm opened, open_tpm(o.tpm));
    open.emplace(std::move(opened));
    TPMSEC_ASSIGN_OR_RETURN(protect, open->protect(std::move(request)));
    TPMSEC_ASSIGN_OR_RETURN(reads, protect->audited_pcr_reads());
  } else if (!o.expected.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(std::string text, read_file(o.expected, size_t{1} << 20));
    auto values = verify::parse_expected_values(text);
    if (!values.ok()) return input_file_error(values.error().with_context(o.expected));
    given = std::move(*values);
  } else {
    TPMSEC_ASSIGN_OR_RETURN(std::string bytes, read_file(o.quote, 4096));
    auto parsed = verify::parse_quote(as_bytes(bytes));
    if (!parsed.ok()) return input_file_error(parsed.error().with_context(o.quote));
    quote = std::move(*parsed);
  }

  // The firmware log is whole since boot: it chooses the banks.
  std::optional<event_log::EventLog> log;
  if (!o.eventlog.empty()) {
    TPMSEC_ASSIGN_OR_RETURN(event_log::EventLog parsed, load_event_log(o.eventlog));
    log = std::move(parsed);
  }
  const event_log::EventLog* lp = log ? &*log : nullptr;

  std::vector<uint16_t> given_banks;
  if (quote) {
    for (const PcrSelection& s : quote->selection.banks) given_banks.push_back(s.hash);
  } else if (reads) {
    for (const PcrBank& b : open->info().pcr_banks) {
      if (!b.pcrs.empty()) given_banks.push_back(b.hash);
    }
  } else {
    for (const auto& [bank, values] : given) given_banks.push_back(bank);
  }
  std::vector<uint16_t> banks = choose_banks(o, lp, given_banks, named);
  if (banks.empty()) return usage_error("no bank to compare: the log's and the values' banks do not meet (--bank)");

  // A live check reads every PCR of those banks first and the IMA list
  // after: a list that grew in between holds the PCR's value at an earlier
  // entry (verify.h), while a list read first could be behind the PCR.
  if (reads) {
    for (uint16_t bank : banks) {
      auto allocated = std::find_if(open->info().pcr_banks.begin(), open->info().pcr_banks.end(),
                                    [&](const PcrBank& b) { return b.hash == bank; });
      if (allocated == open->info().pcr_banks.end() || allocated->pcrs.empty()) {
        fmt::print(stderr, "tpmsec: note: the TPM has no {} bank allocated; not compared\n", hash_name(bank));
        continue;
      }
      for (uint32_t pcr : allocated->pcrs) {
        if (pcr >= event_log::kPcrCount) continue;
        TPMSEC_ASSIGN_OR_RETURN(given[bank][pcr], reads->read(bank, pcr));
      }
    }
  }

  std::vector<ima::Entry> entries;
  if (!o.ima.empty()) {
    // The digests the workload computes are not needed: parse for the entries.
    TPMSEC_ASSIGN_OR_RETURN(ImaWorkload w, load_ima_workload(o.ima, alg::kSha1, o.skip_bad, o.strict));
    if (w.stopped_at) {
      return input_file_error(Error(w.stopped_at->error.kind(),
                                    fmt::format("{}: {} (--skip-bad leaves bad entries out)", o.ima,
                                                w.stopped_at->error.message())));
    }
    for (const ima::Problem& p : w.problems) fmt::print(stderr, "tpmsec: {}: {} (skipped)\n", o.ima, p.error.message());
    entries = std::move(w.kept);
  }

  verify::ImpliedValues implied;
  for (uint16_t bank : banks) {
    auto chains = verify::implied_values(lp, entries, bank);
    if (!chains.ok()) return input_file_error(chains.error());
    implied[bank] = std::move(*chains);
  }

  std::FILE* out = report_stream({o.json});
  nlohmann::json results = nlohmann::json::array();
  bool differs = false;
  size_t compared = 0;
  if (quote) {
    // The log's value of every PCR the quote selects (one no log extends
    // holds its start value), hashed as the TPM hashed them.
    PcrValues values;
    for (const PcrSelection& s : quote->selection.banks) {
      if (!implied.count(s.hash)) {
        auto chains = verify::implied_values(lp, entries, s.hash);
        if (!chains.ok()) return input_file_error(chains.error().with_context("the quote's bank"));
        implied[s.hash] = std::move(*chains);
      }
      for (uint32_t pcr = 0; pcr < 8 * s.select.size(); ++pcr) {
        if (!s.has(pcr)) continue;
        auto it = implied[s.hash].find(pcr);
        values[s.hash][pcr] = it != implied[s.hash].end() ? it->second.value() : untouched_value(s.hash, pcr, lp);
      }
    }
    bool match = false;
    std::string used;
    for (uint16_t h : verify::hashes_of_size(quote->pcr_digest.size())) {
      auto digest = verify::quote_pcr_digest(quote->selection, values, h);
      if (!digest.ok()) return digest.error();
      if (*digest == quote->pcr_digest) {
        match = true;
        used = std::string(hash_name(h));
      }
    }
    std::vector<std::string> selected;
    for (const PcrSelection& s : quote->selection.banks) {
      std::vector<uint32_t> idx;
      for (uint32_t pcr = 0; pcr < 8 * s.select.size(); ++pcr) {
        if (s.has(pcr)) idx.push_back(pcr);
      }
      selected.push_back(fmt::format("{}:{}", hash_name(s.hash), fmt::join(idx, ",")));
    }
    fmt::print(out, "{:<10}{} (reset count {}, restart count {}, clock {})\n", "quote", o.quote, quote->reset_count,
               quote->restart_count, quote->clock);
    fmt::print(out, "{:<10}{}\n", "selects", fmt::join(selected, " "));
    fmt::print(out, "{:<10}{}: {}\n", "digest", to_hex(quote->pcr_digest),
               match ? fmt::format("match (the log's values, hashed with {})", used)
                     : "DIFFERS from the log's values for the selection");
    results.push_back({{"quote", o.quote}, {"pcr_digest", to_hex(quote->pcr_digest)}, {"match", match}});
    differs = !match;
    compared = 1;
    if (!match) {
      // Which PCR parts is not in a digest; say what the log gives for each.
      for (const auto& [bank, pcrs] : values) {
        for (const auto& [pcr, v] : pcrs) fmt::print(out, "{:<10}PCR {} {} per the log: {}\n", "", pcr, hash_name(bank), to_hex(v));
      }
    }
  } else {
    for (const verify::PcrResult& r : verify::compare(implied, given)) {
      if (r.verdict == Verdict::kNotGiven) {
        fmt::print(out, "{}\n", r.message);
      } else {
        ++compared;
        fmt::print(out, "{}\n", r.message);
        if (r.verdict == Verdict::kDiffers) {
          fmt::print(out, "    {:<6}{}\n    {:<6}{}\n", "log", to_hex(r.expected), reads ? "TPM" : "file", to_hex(r.actual));
          differs = true;
        }
      }
      results.push_back({{"bank", hash_name(r.bank)},
                         {"pcr", r.pcr},
                         {"verdict", verdict_word(r.verdict)},
                         {"events", r.events},
                         {"covered", r.covered},
                         {"first_apart", r.first_apart},
                         {"log", to_hex(r.expected)},
                         {"given", to_hex(r.actual)}});
    }
  }
  if (!o.json.empty()) {
    nlohmann::json j = {{"schema", "tpmsec-verify/1"},
                        {"eventlog", o.eventlog},
                        {"ima", o.ima},
                        {"source", reads ? "tpm" : quote ? "quote" : "expected"},
                        {"results", results},
                        {"match", !differs && compared > 0}};
    TPMSEC_RETURN_IF_ERROR(write_file(o.json, j.dump(2) + "\n"));
  }
  if (differs) return integrity_error("the log does not explain the PCR values (above)");
  if (compared == 0) return usage_error("no PCR of the log is among the values given: nothing was compared");
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
  sub->add_option("--bank", o->banks, "Banks to compare (sha1, sha256, sha384, sha512, sm3_256); default: the log's")
      ->delimiter(',');
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
