// The files tpmsec writes, and the rules it writes them by (a root tool's rules: nothing half-written, no
// symlink another user could plant ever followed, secrets readable by their owner only).
//   Reports (--json, --svg, -o, ...): a regular file or a new name is replaced by a temporary file renamed
//   over it (O_CREAT|O_EXCL|O_NOFOLLOW, same directory; mode kept, or new_mode less the umask); a FIFO,
//   character device or socket is written in place; "-" is standard output; a symbolic link is followed
//   only in a directory nobody but root and the caller can write (trusted_dir).
//   TPM state and kept secrets (the state directory): one rule, checked by one function on every read,
//   write and removal before a byte is used: every directory from the state root down opened with
//   O_NOFOLLOW from the one above, owned by root or the effective uid and writable by nobody else; the
//   root's parent likewise unless sticky; files regular, owned so, 0600 or stricter; written 0600 in 0700
//   directories whatever the umask, synced before the rename.
// Errors: anything else is refused, kRuntime (exit 1), one line naming the path, its owner (uid and user
// name) and its mode. Functions only, no state: thread-safe as the file system is.
// The full rules and why: docs/threat-model.md, "Files", and its subsection "The rules as
// include/tpmsec/host/files.h applies them".
#ifndef TPMSEC_HOST_FILES_H_
#define TPMSEC_HOST_FILES_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tpmsec/result.h"

namespace tpmsec::files {

// How write_output() will write `path` (what plan_output() found).
struct OutputPlan {
  enum class Kind { kReplace, kInPlace };
  Kind kind = Kind::kReplace;
  // What is replaced or written: `path` itself, or the target of a link in a
  // trusted directory.
  std::string file;
  // One string per distinct output (device and inode, or the path when the
  // file does not exist yet), so a caller can refuse the same output twice.
  std::string identity;
};

// Decides how `path` would be written, without writing it: kUsage errors
// that start with `path` ("PATH: is a directory", "PATH: directory D does not
// exist", "PATH: a symbolic link to a missing file", "PATH: a symbolic link
// in D, which other users can write, to a device or FIFO: refused").
Result<OutputPlan> plan_output(const std::string& path);

// Writes `content` to `path` by the rules above; kRuntime "cannot write
// PATH: reason" on failure, and then `path` is as it was.
Status write_output(const std::string& path, std::string_view content, mode_t new_mode = 0644);

// Appends `content` to the log `path` in one write (O_APPEND: blocks from
// processes appending at once do not interleave within a write): a FIFO,
// device or socket as write_output() writes it; a regular file in place, or
// created `new_mode` less the umask when missing; a symbolic link only where
// write_output() follows one (else kRuntime, never followed). kRuntime
// "cannot write PATH: reason" on failure.
Status append_output(const std::string& path, std::string_view content, mode_t new_mode = 0644);

// True when `st` (a directory) can be written by nobody but root and the
// caller: owned by one of them, no group or other write bit.
bool trusted_dir(const struct stat& st);

// A file (or directory) kept under a state directory: `root` is the
// directory the user named ($TPMSEC_STATE_DIR, embedded:state=DIR),
// `below` its path under the root ("bind/ID"; empty: the root itself).
struct StatePath {
  std::string root;
  std::string below;
  // root/below: what messages name.
  std::string full() const;
};

// What a state file must outlive: a crash of the host (synced before the
// rename: pins, secrets, caches), or only the end of the process that wrote
// it (a record about this boot alone, which a host crash ends anyway: no
// fsync, so writing it often costs no disk flush).
enum class Durability { kHostCrash, kProcessEnd };

// Creates the directory `dir` (the root, its missing parents and the
// directories under it) 0700, or checks the existing ones by the rule above
// and narrows the caller's own to 0700.
Status make_private_dir(const StatePath& dir);

// Replaces `file` with `content`, mode 0600 whatever the umask, synced (as
// `durability` asks), after make_private_dir() on its directory.
Status write_private(const StatePath& file, std::string_view content, Durability durability = Durability::kHostCrash);

// The content of state file `file` (at most `max_bytes`, else kParse), or
// none when it, or a directory on its way, does not exist. Checked by the
// rule above first (kRuntime): a symbolic link is never followed.
Result<std::optional<std::string>> read_private(const StatePath& file, size_t max_bytes);

// Removes `file` from its checked directory; true when it existed.
Result<bool> remove_private(const StatePath& file);

// The names in the checked directory `dir`; none listed when it does not
// exist.
Result<std::vector<std::string>> list_private(const StatePath& dir);

}  // namespace tpmsec::files

#endif  // TPMSEC_HOST_FILES_H_
