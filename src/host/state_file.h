// Small files tpmsec keeps in its state directory (pins, caches, secrets):
// read with a size bound, written whole or not at all (files::write_private),
// readable only by their owner, each checked by files.h's rule first.
#ifndef TPMSEC_SRC_HOST_STATE_FILE_H_
#define TPMSEC_SRC_HOST_STATE_FILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tpmsec/host/files.h"
#include "tpmsec/host_state.h"
#include "tpmsec/null_key.h"
#include "tpmsec/result.h"

namespace tpmsec::state_file {

inline constexpr size_t kMaxBytes = 16384;

// The text of state file `file`, none when it does not exist. Checked
// first, every directory on its way and the file itself (files.h: kRuntime
// naming the path and its owner); larger than kMaxBytes is kParse naming it.
Result<std::optional<std::string>> read(const files::StatePath& file);
// "key=value" lines; lines without '=' are ignored, a later key wins.
std::map<std::string, std::string> parse_lines(const std::string& text);
// The lines of record `file` (read(), then parse_lines(); the text read is
// wiped: a record may hold a secret); none when it does not exist.
Result<std::optional<std::map<std::string, std::string>>> read_fields(const files::StatePath& file);
// The folder under the state root that holds records of `what`.
const char* folder(StateRecord what);
// A salt kind as file names and records write it: "ecc", "rsa".
const char* salt_label(SaltKind kind);
// A handle as kept files write it ("0x81000001"); none if it is not one.
std::optional<uint32_t> handle_value(const std::string& text);

}  // namespace tpmsec::state_file

#endif  // TPMSEC_SRC_HOST_STATE_FILE_H_
