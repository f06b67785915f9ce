// Small files tpmsec keeps in its state directory (pins, caches, secrets):
// read with a size bound, written whole or not at all, readable only by
// their owner.
#ifndef TPMSEC_SRC_HOST_STATE_FILE_H_
#define TPMSEC_SRC_HOST_STATE_FILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tpmsec/host/files.h"
#include "tpmsec/null_key.h"
#include "tpmsec/result.h"

namespace tpmsec::state_file {

inline constexpr size_t kMaxBytes = 16384;

// The file's text; empty with *missing set when it does not exist. Larger
// than kMaxBytes is kParse naming the file; a symbolic link is refused, never
// followed (files::read_private).
Result<std::string> read(const std::string& path, bool* missing);
// "key=value" lines; lines without '=' are ignored, a later key wins.
std::map<std::string, std::string> parse_lines(const std::string& text);
// The lines of record `path` (read(), then parse_lines(); the text read is
// wiped: a record may hold a secret); none when it does not exist.
Result<std::optional<std::map<std::string, std::string>>> read_fields(const std::string& path);
// Creates `dir` (and parents) 0700, or checks an existing one and restricts
// it to its owner (files::make_private_dir: refused when others can write it).
Status make_private_dir(const std::string& dir);
// Writes `text` to `path` (mode 0600, whatever the umask) through a synced
// temporary file and a rename, after making its directory private
// (files::write_private).
Status write_private(const std::string& dir, const std::string& path, const std::string& text,
                     files::Durability durability = files::Durability::kHostCrash);
// A salt kind as file names and records write it: "ecc", "rsa".
const char* salt_label(SaltKind kind);
// A handle as kept files write it ("0x81000001"); none if it is not one.
std::optional<uint32_t> handle_value(const std::string& text);
// Removes `path`; true when it existed.
Result<bool> remove(const std::string& path);

}  // namespace tpmsec::state_file

#endif  // TPMSEC_SRC_HOST_STATE_FILE_H_
