// Feeds the input to every measurement-log parser (IMA binary and ascii, the
// TCG crypto-agile event log) and checks what they promise about what they
// accept: rebuilt template data matches the logged template hash, bounds hold,
// problems point inside the entry list, and replay works on whatever parsed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/replay/event_log.h"
#include "tpmsec/replay/ima_log.h"

namespace {

using namespace tpmsec;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "log_parsers_fuzzer: %s\n", what);
  std::abort();
}

void check_ima(const ima::ParsedLog& log) {
  size_t previous = 0;
  for (const ima::Problem& p : log.problems) {
    if (p.entry_index < previous || p.entry_index > log.entries.size()) die("problem entry_index out of order");
    if (p.error.message().empty()) die("problem without a message");
    previous = p.entry_index;
  }
  if (!log.complete && log.problems.empty()) die("incomplete parse without a problem");
  for (const ima::Entry& e : log.entries) {
    if (e.pcr > ima::kMaxPcrIndex) die("PCR index above the bound");
    if (e.template_data.size() > ima::kMaxTemplateDataSize) die("template data above the bound");
    // The list's bank (sha1 for the classic lists, a per-bank list's own).
    if (e.template_hash.size() != digest_size(log.hash_bank)) die("template hash of the wrong size");
    if (!e.violation) {
      Result<Bytes> h = crypto::hash(log.hash_bank, {e.template_data});
      if (!h.ok() || *h != e.template_hash) die("accepted an entry whose template hash does not match");
    }
  }
  if (log.tail) {
    if (log.problems.empty()) die("a tail without its problem");
    if (log.tail->bytes == 0) die("an empty tail");
  }
  if (!ima::replay(log.entries, alg::kSha256).ok()) die("replay of parsed entries failed");
  if (log.entries_before_first_problem().size() > log.entries.size()) die("prefix longer than the list");
}

void check_event_log(ByteView data) {
  Result<event_log::EventLog> log = event_log::parse_event_log(data);
  if (!log.ok()) {
    if (log.error().message().rfind("event ", 0) != 0) die("event log error does not name the event");
    return;
  }
  for (const event_log::Event& e : log->events) {
    if (e.data.size() > event_log::kMaxEventSize) die("event above the size bound");
    if (e.digests.size() > log->spec_id.algorithms.size()) die("more digests than banks");
  }
  for (uint16_t bank : log->banks()) {
    auto pcrs = event_log::replay_event_log(*log, bank);
    if (!pcrs.ok() && pcrs.error().kind() != ErrorKind::kParse && pcrs.error().kind() != ErrorKind::kUnsupported) {
      die("unexpected replay error kind");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  ByteView data(bytes, size);
  check_ima(ima::parse_binary_log(data));
  check_ima(ima::parse_ascii_log(std::string_view(reinterpret_cast<const char*>(bytes), size)));
  Result<ima::ParsedLog> detected = ima::parse_log(data);
  if (detected.ok()) check_ima(*detected);
  check_event_log(data);
  return 0;
}
