// The chains a firmware log and an IMA list imply, and their comparison with
// given PCR values (contract in tpmsec/replay/verify.h).
#include <fmt/format.h>

#include <algorithm>

#include "replay/printable.h"
#include "tpmsec/constants.h"
#include "tpmsec/pcr.h"
#include "tpmsec/replay/verify.h"

namespace tpmsec::verify {

Result<std::map<uint32_t, Implied>> implied_values(const event_log::EventLog* log, std::span<const ima::Entry> ima,
                                                   uint16_t bank) {
  std::optional<uint16_t> size = digest_size(bank);
  if (!size) return unsupported_error(fmt::format("PCR bank 0x{:04x} is not a known hash", bank));
  std::map<uint32_t, Implied> pcrs;
  auto chain = [&](uint32_t pcr) -> Implied& {
    auto [it, inserted] = pcrs.try_emplace(pcr);
    if (inserted) {
      it->second.initial.assign(*size, 0);
      if (pcr == 0 && log != nullptr) it->second.initial.back() = log->pcr0_locality();
    }
    return it->second;
  };
  if (log != nullptr) {
    // The firmware log's own replay checks the bank and the digests; its
    // values are the chains' ends (checked below).
    TPMSEC_ASSIGN_OR_RETURN(auto ends, event_log::replay_event_log(*log, bank));
    for (const event_log::Event& e : log->events) {
      if (e.event_type == event_log::kEvNoAction) continue;
      Implied& c = chain(e.pcr);
      TPMSEC_ASSIGN_OR_RETURN(Bytes after, pcr_extended_value(bank, c.value(), *e.digest_for(bank)));
      c.steps.push_back(Step{fmt::format("event {} at offset {} (type 0x{:x})", e.index, e.offset, e.event_type), false,
                             std::move(after)});
    }
    for (const auto& [pcr, value] : ends) {
      if (chain(pcr).value() != value)
        return parse_error(fmt::format("PCR {}: the event chain does not end at the log's value", pcr));
    }
  }
  size_t n = 0;
  for (const ima::Entry& entry : ima) {
    TPMSEC_ASSIGN_OR_RETURN(Bytes digest, ima::extend_digest(entry, bank));
    Implied& c = chain(entry.pcr);
    TPMSEC_ASSIGN_OR_RETURN(Bytes after, pcr_extended_value(bank, c.value(), digest));
    std::string where = entry.line != 0 ? fmt::format("line {}", entry.line) : fmt::format("offset {}", entry.offset);
    c.steps.push_back(
        Step{fmt::format("IMA entry {} ({}, {})", n++, where, replay_internal::printable(entry.event_name)), true,
             std::move(after)});
  }
  return pcrs;
}

Bytes reset_value(uint16_t bank, uint32_t pcr, const event_log::EventLog* log) {
  Bytes v(digest_size(bank).value_or(0), pcr >= 17 && pcr <= 22 ? 0xff : 0x00);
  if (pcr == 0 && log != nullptr && !v.empty()) v.back() = log->pcr0_locality();
  return v;
}

void add_unextended(ImpliedValues& implied, const PcrValues& given, const event_log::EventLog* log) {
  for (auto& [bank, pcrs] : implied) {
    auto values = given.find(bank);
    if (values == given.end()) continue;
    for (const auto& [pcr, value] : values->second) {
      if (!pcrs.count(pcr)) pcrs[pcr].initial = reset_value(bank, pcr, log);
    }
  }
}

namespace {

PcrResult compare_one(uint16_t bank, uint32_t pcr, const Implied& chain, const Bytes* given) {
  PcrResult r;
  r.bank = bank;
  r.pcr = pcr;
  r.expected = chain.value();
  r.events = chain.steps.size();
  std::string name = fmt::format("PCR {} {}", pcr, hash_name(bank));
  if (given == nullptr) {
    r.verdict = Verdict::kNotGiven;
    r.message = fmt::format("{}: not among the values given", name);
    return r;
  }
  r.actual = *given;
  if (*given == chain.value()) {
    r.verdict = Verdict::kMatch;
    r.covered = chain.steps.size();
    r.message = chain.steps.empty() ? fmt::format("{}: match (no log extends it: its reset value)", name)
                                    : fmt::format("{}: match ({} event{})", name, r.events, r.events == 1 ? "" : "s");
    return r;
  }
  if (chain.steps.empty()) {
    r.verdict = Verdict::kDiffers;
    r.first_apart = "its reset value";
    r.message =
        fmt::format("{}: DIFFERS: no log extends it, yet it is not its reset value (an extend no log records)", name);
    return r;
  }
  // The latest point of the chain the given value equals, if any.
  std::optional<size_t> held;
  if (*given == chain.initial) held = 0;
  for (size_t k = 0; k + 1 < chain.steps.size(); ++k) {
    if (chain.steps[k].after == *given) held = k + 1;
  }
  r.verdict = Verdict::kDiffers;
  if (held) {
    const Step& next = chain.steps[*held];
    r.covered = *held;
    r.first_apart = next.what;
    // Only IMA entries may follow the PCR read: an IMA list grows, a
    // firmware log is whole at boot.
    bool only_ima_after = std::all_of(chain.steps.begin() + static_cast<std::ptrdiff_t>(*held), chain.steps.end(),
                                      [](const Step& s) { return s.ima; });
    if (only_ima_after && *held > 0) {
      r.verdict = Verdict::kCovered;
      r.message = fmt::format(
          "{}: match of the first {} of {} events; the {} from {} on are not in this value (an "
          "IMA list read after the PCR grew in between)",
          name, *held, r.events, r.events - *held, next.what);
    } else {
      r.message = fmt::format(
          "{}: DIFFERS: the value holds the log's first {} of {} events and none after: they part "
          "at {}",
          name, *held, r.events, next.what);
    }
    return r;
  }
  r.first_apart = chain.steps.empty() ? "the PCR's initial value" : chain.steps.front().what;
  r.message = fmt::format(
      "{}: DIFFERS: the value is no point of the log's chain of {} events: they part at or "
      "before {} (an extend the log does not record, or an event whose digest is not what was "
      "extended)",
      name, r.events, r.first_apart);
  return r;
}

}  // namespace

std::vector<PcrResult> compare(const ImpliedValues& implied, const PcrValues& actual) {
  std::vector<PcrResult> out;
  for (const auto& [bank, pcrs] : implied) {
    auto given_bank = actual.find(bank);
    for (const auto& [pcr, chain] : pcrs) {
      const Bytes* given = nullptr;
      if (given_bank != actual.end()) {
        auto it = given_bank->second.find(pcr);
        if (it != given_bank->second.end()) given = &it->second;
      }
      out.push_back(compare_one(bank, pcr, chain, given));
    }
  }
  return out;
}

std::vector<uint16_t> hashes_of_size(size_t size) {
  std::vector<uint16_t> out;
  for (uint16_t h : {alg::kSha1, alg::kSha256, alg::kSm3_256, alg::kSha384, alg::kSha512}) {
    if (digest_size(h) == size) out.push_back(h);
  }
  return out;
}

}  // namespace tpmsec::verify
