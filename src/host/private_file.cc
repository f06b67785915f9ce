// TPM state and kept secrets: 0600 files in 0700 directories, every one on
// the way checked before it is used (include/tpmsec/host/files.h).
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "file_replace.h"
#include "tpmsec/host/files.h"

namespace tpmsec::files {

using internal::Fd;

std::string StatePath::full() const { return below.empty() ? root : root + "/" + below; }

namespace {

// What a checked path is to the state: the directory holding the state root,
// a directory from the root down, or a state file.
enum class Node { kHolder, kDir, kFile };

const char* label(Node node) {
  switch (node) {
    case Node::kHolder:
      return "the state directory's parent";
    case Node::kDir:
      return "state directory";
    case Node::kFile:
      return "state file";
  }
  return "";
}

// "uid 65534 (nobody)", or "uid 4242" when no user has the uid.
std::string owner_text(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::array<char, 4096> buf{};
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return fmt::format("uid {} ({})", uid, found->pw_name);
  }
  return fmt::format("uid {}", uid);
}

// Why `st` may not serve as `node`, empty when it may: the rule of files.h.
std::string_view unsafe_because(const struct stat& st, Node node) {
  if (S_ISLNK(st.st_mode)) return "is a symbolic link, never followed";
  if (node == Node::kFile && !S_ISREG(st.st_mode)) return "is not a regular file";
  if (node != Node::kFile && !S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) return "belongs to neither root nor this user";
  if (node == Node::kFile) return (st.st_mode & 07177) != 0 ? "is not mode 0600 or stricter" : "";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0) return "";
  // Others may add names to a sticky directory (/tmp) but not rename or
  // remove the caller's: the state root in it cannot be swapped.
  if (node == Node::kHolder)
    return (st.st_mode & S_ISVTX) != 0 ? "" : "can be written by group or others and is not sticky";
  return "can be written by group or others";
}

// The one check of every state path, read or written: kRuntime, one line
// naming `path`, its owner and its mode, when `st` may not serve as `node`.
Status check(const struct stat& st, const std::string& path, Node node) {
  std::string_view why = unsafe_because(st, node);
  if (why.empty()) return ok_status();
  return runtime_error(fmt::format("{} {} (owner {}, mode {:04o}) {}: refused", label(node), path,
                                   owner_text(st.st_uid), st.st_mode & 07777, why));
}

// `name` in directory `dir` (`path` in messages) opened as `node` without
// following a link, then checked; none when it does not exist.
Result<std::optional<Fd>> open_checked(int dir, const std::string& name, const std::string& path, Node node) {
  const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (node == Node::kFile ? O_NONBLOCK | O_NOCTTY : O_DIRECTORY);
  Fd fd(::openat(dir, name.c_str(), flags));
  struct stat st {};
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return std::optional<Fd>();
    // A link (ELOOP; ENOTDIR with O_DIRECTORY), a socket (ENXIO): named as
    // what it is.
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) TPMSEC_RETURN_IF_ERROR(check(st, path, node));
    return runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(err)));
  }
  if (::fstat(fd.get(), &st) != 0) return runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  TPMSEC_RETURN_IF_ERROR(check(st, path, node));
  return std::optional<Fd>(std::move(fd));
}

// Creates each missing directory of `dir`, 0700 whatever the umask: the
// parents of a state root that does not exist yet.
Status create_parents(const std::string& dir) {
  std::filesystem::path so_far;
  for (const auto& part : std::filesystem::path(dir).lexically_normal()) {
    so_far /= part;
    if (part.empty()) continue;
    if (::mkdir(so_far.c_str(), 0700) == 0) {
      if (::chmod(so_far.c_str(), 0700) != 0) {
        return runtime_error(fmt::format("cannot restrict {} to its owner: {}", so_far.string(), std::strerror(errno)));
      }
    } else if (errno != EEXIST) {
      return runtime_error(fmt::format("cannot create {}: {}", so_far.string(), std::strerror(errno)));
    }
  }
  return ok_status();
}

enum class Walk { kRead, kWrite };

// The directory holding state root `root`, opened by its path (links above
// the root are the system's, /var -> /private/var) and checked; none when it
// does not exist and `walk` reads.
Result<std::optional<Fd>> open_holder(const std::string& holder, const std::string& root, Walk walk) {
  Fd fd(::open(holder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 && errno == ENOENT) {
    if (walk == Walk::kRead) return std::optional<Fd>();
    TPMSEC_RETURN_IF_ERROR(create_parents(holder));
    fd.reset(::open(holder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
    return runtime_error(fmt::format("state directory {}: {}: {}", root, holder, std::strerror(errno)));
  }
  TPMSEC_RETURN_IF_ERROR(check(st, holder, Node::kHolder));
  return std::optional<Fd>(std::move(fd));
}

// One directory down from `dir`: `name`, checked; when writing, created 0700
// if missing and narrowed to 0700 if the caller's.
Result<std::optional<Fd>> step_down(int dir, const std::string& name, const std::string& path, Walk walk) {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fd> next, open_checked(dir, name, path, Node::kDir));
  if (walk == Walk::kRead) return next;
  if (!next) {
    if (::mkdirat(dir, name.c_str(), 0700) != 0 && errno != EEXIST) {
      return runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    }
    TPMSEC_ASSIGN_OR_RETURN(next, open_checked(dir, name, path, Node::kDir));
    if (!next) return runtime_error(fmt::format("cannot create {}: removed as it was made", path));
  }
  struct stat st {};
  if (::fstat(next->get(), &st) == 0 && (st.st_mode & 07777) != 0700 && st.st_uid == ::geteuid() &&
      ::fchmod(next->get(), 0700) != 0) {
    return runtime_error(fmt::format("cannot restrict {} to its owner: {}", path, std::strerror(errno)));
  }
  return next;
}

// The directory `dir`, opened from the holder of its root down, each
// directory checked on the way (files.h); none when one on the way does not
// exist and `walk` reads. Writing creates the missing ones.
Result<std::optional<Fd>> open_state_dir(const StatePath& dir, Walk walk) {
  if (dir.root.empty()) return runtime_error("an empty state directory name");
  std::filesystem::path root = std::filesystem::path(dir.root).lexically_normal();
  if (!root.has_filename() && root.has_relative_path()) root = root.parent_path();  // "dir/"
  std::string holder = root.parent_path().string(), root_name = root.filename().string();
  if (holder.empty()) holder = ".";
  if (root_name.empty()) root_name = ".";  // "/"
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fd> fd, open_holder(holder, dir.root, walk));
  std::string path = dir.root;
  std::vector<std::string> names{root_name};
  for (const auto& part : std::filesystem::path(dir.below)) {
    if (part.empty() || part == "." || part == "/") continue;
    if (part == "..") return runtime_error(fmt::format("{}: leaves its state directory", dir.full()));
    names.push_back(part.string());
  }
  for (size_t i = 0; i < names.size() && fd; ++i) {
    if (i > 0) path += "/" + names[i];
    TPMSEC_ASSIGN_OR_RETURN(fd, step_down(fd->get(), names[i], path, walk));
  }
  return fd;
}

// `file` split into its checked directory (none when reading and missing)
// and its name.
struct OpenedParent {
  std::optional<Fd> dir;
  std::string name;
};
Result<OpenedParent> open_parent(const StatePath& file, Walk walk) {
  auto parts = internal::split(file.below);
  if (!parts) return runtime_error(fmt::format("{}: names no state file", file.full()));
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fd> dir, open_state_dir(StatePath{file.root, parts->dir}, walk));
  return OpenedParent{std::move(dir), parts->name};
}

}  // namespace

Status make_private_dir(const StatePath& dir) { return status_of(open_state_dir(dir, Walk::kWrite)); }

Status write_private(const StatePath& file, std::string_view content, Durability durability) {
  TPMSEC_ASSIGN_OR_RETURN(OpenedParent at, open_parent(file, Walk::kWrite));
  internal::ReplaceOptions options;
  options.mode = 0600;
  options.exact = true;
  options.sync = durability == Durability::kHostCrash;
  if (int err = internal::replace_at(at.dir->get(), at.name, content, options)) {
    return runtime_error(fmt::format("cannot write {}: {}", file.full(), std::strerror(err)));
  }
  return ok_status();
}

Result<std::optional<std::string>> read_private(const StatePath& file, size_t max_bytes) {
  const std::string path = file.full();
  TPMSEC_ASSIGN_OR_RETURN(OpenedParent at, open_parent(file, Walk::kRead));
  if (!at.dir) return std::optional<std::string>();
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fd> fd, open_checked(at.dir->get(), at.name, path, Node::kFile));
  if (!fd) return std::optional<std::string>();
  std::string text;
  if (int err = internal::read_all(fd->get(), max_bytes, &text)) {
    if (err == EFBIG)
      return parse_error(fmt::format("{}: not a tpmsec state file (larger than {} bytes)", path, max_bytes));
    return runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(err)));
  }
  return std::optional<std::string>(std::move(text));
}

Result<bool> remove_private(const StatePath& file) {
  TPMSEC_ASSIGN_OR_RETURN(OpenedParent at, open_parent(file, Walk::kRead));
  if (!at.dir) return false;
  if (::unlinkat(at.dir->get(), at.name.c_str(), 0) == 0) return true;
  if (errno == ENOENT) return false;
  return runtime_error(fmt::format("cannot remove {}: {}", file.full(), std::strerror(errno)));
}

Result<std::vector<std::string>> list_private(const StatePath& dir) {
  TPMSEC_ASSIGN_OR_RETURN(std::optional<Fd> fd, open_state_dir(dir, Walk::kRead));
  std::vector<std::string> names;
  if (!fd) return names;
  Fd copy(::dup(fd->get()));
  DIR* listing = copy.get() < 0 ? nullptr : ::fdopendir(copy.get());
  if (listing == nullptr) return runtime_error(fmt::format("cannot list {}: {}", dir.full(), std::strerror(errno)));
  (void)copy.release();  // the DIR owns it now
  while (const struct dirent* e = ::readdir(listing)) {
    std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(listing);
  return names;
}

}  // namespace tpmsec::files
