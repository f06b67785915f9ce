#include "log_input.h"

#include <fmt/format.h>

#include "cli.h"
#include "tpmsec/constants.h"

namespace tpmsec::cli {

Result<ImaWorkload> load_ima_workload(const std::string& path, uint16_t bank, bool skip_bad, bool strict) {
  TPMSEC_ASSIGN_OR_RETURN(std::string content, read_file(path, kMaxLogBytes));
  std::optional<uint16_t> hash_bank = ima::bank_from_file_name(path);
  auto workload = ima_workload(as_bytes(content), bank, skip_bad, hash_bank);
  if (!workload.ok()) return usage_error(fmt::format("{}: {}", path, workload.error().message()));
  if (workload->stopped_at) {
    // Refused before any use, so no command acts on, or reports a result
    // from, part of a list: a wrong template hash stays an integrity
    // failure, a malformed entry is bad input.
    const Error& e = workload->stopped_at->error;
    return input_file_error(
        Error(e.kind(), fmt::format("{}: {} (--skip-bad leaves bad entries out)", path, e.message())));
  }
  if (workload->tail) {
    std::string what =
        fmt::format("{}: it ends in a partial entry, {} byte{} from offset {}", path, workload->tail->bytes,
                    workload->tail->bytes == 1 ? "" : "s", workload->tail->offset);
    if (strict) return input_file_error(parse_error(what + " (--strict)"));
    fmt::print(stderr, "tpmsec: warning: {}; the {} whole entries before it are used (--strict refuses this)\n", what,
               workload->entries);
  }
  return workload;
}

Result<event_log::EventLog> load_event_log(const std::string& path) {
  TPMSEC_ASSIGN_OR_RETURN(std::string content, read_file(path, kMaxLogBytes));
  auto log = event_log::parse_event_log(as_bytes(content));
  if (!log.ok()) return input_file_error(Error(log.error().kind(), fmt::format("{}: {}", path, log.error().message())));
  return log;
}

}  // namespace tpmsec::cli
