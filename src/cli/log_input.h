// Reading measurement logs for the commands that take them (replay, predict,
// verify): the file, the per-bank IMA list's bank from its name, and the
// partial-tail rule, in one place.
#ifndef TPMSEC_SRC_CLI_LOG_INPUT_H_
#define TPMSEC_SRC_CLI_LOG_INPUT_H_

#include <cstdint>
#include <string>

#include "tpmsec/replay/event_log.h"
#include "tpmsec/replay/replay.h"

namespace tpmsec::cli {

// The IMA list at `path` as the digests the kernel extends into `bank`. A
// per-bank list's template-hash bank comes from its file name
// (ascii_runtime_measurements_sha256, …), else from its hash column's size.
// A partial entry at the end (a list read while the kernel appended to it, a
// stray newline after a binary list) is left out with a warning on stderr
// naming its offset and size; with `strict` it is an error. Without
// `skip_bad` a bad entry is an error naming its line or offset, so no caller
// uses part of a list: a template hash that does not match its fields is
// kIntegrity (exit 3), anything else bad input (exit 2, input_file_error), as
// a missing or unreadable file is. Errors name the file.
Result<ImaWorkload> load_ima_workload(const std::string& path, uint16_t bank, bool skip_bad, bool strict);

// The firmware event log at `path`, parsed; errors name the file.
Result<event_log::EventLog> load_event_log(const std::string& path);

}  // namespace tpmsec::cli

#endif  // TPMSEC_SRC_CLI_LOG_INPUT_H_
