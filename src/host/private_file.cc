// TPM state and kept secrets: 0600 files in 0700 directories
// (include/tpmsec/host/files.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "file_replace.h"
#include "tpmsec/host/files.h"

namespace tpmsec::files {

using internal::Fd;

namespace {

// Creates each missing directory of `dir`, 0700 whatever the umask.
Status create_private(const std::string& dir) {
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

// `dir`, created or checked (see make_private_dir), open.
Result<Fd> open_private_dir(const std::string& dir) {
  if (dir.empty()) return runtime_error("an empty state directory name");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return runtime_error(fmt::format("state directory {}: {}", dir, std::strerror(errno)));
    TPMSEC_RETURN_IF_ERROR(create_private(dir));
  }
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return runtime_error(fmt::format("state directory {}: {}", dir, std::strerror(errno)));
  if (::fstat(fd.get(), &st) != 0) return runtime_error(fmt::format("state directory {}: {}", dir, std::strerror(errno)));
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return runtime_error(
        fmt::format("state directory {} belongs to uid {}, neither root nor this user: refused", dir, st.st_uid));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return runtime_error(fmt::format("state directory {} can be written by group or others (mode {:04o}): refused; "
                                     "chmod 700 it",
                                     dir, st.st_mode & 07777));
  }
  if ((st.st_mode & 07777) != 0700 && st.st_uid == ::geteuid() && ::fchmod(fd.get(), 0700) != 0) {
    return runtime_error(fmt::format("cannot restrict {} to its owner: {}", dir, std::strerror(errno)));
  }
  return Result<Fd>(std::move(fd));
}

}  // namespace

Status make_private_dir(const std::string& dir) { return status_of(open_private_dir(dir)); }

Status write_private(const std::string& path, std::string_view content, Durability durability) {
  auto parts = internal::split(path);
  if (!parts) return runtime_error(fmt::format("cannot write {}: names no file", path));
  TPMSEC_ASSIGN_OR_RETURN(Fd dir, open_private_dir(parts->dir));
  internal::ReplaceOptions options;
  options.mode = 0600;
  options.exact = true;
  options.sync = durability == Durability::kHostCrash;
  if (int err = internal::replace_at(dir.get(), parts->name, content, options)) {
    return runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  return ok_status();
}

Result<std::optional<std::string>> read_private(const std::string& path, size_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    if (errno == ELOOP) return runtime_error(fmt::format("{}: a symbolic link, not a state file: refused", path));
    return runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return runtime_error(fmt::format("{}: not a regular file: refused", path));
  std::string text;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      return parse_error(fmt::format("{}: not a tpmsec state file (larger than {} bytes)", path, max_bytes));
    }
  }
  return std::optional<std::string>(std::move(text));
}

}  // namespace tpmsec::files
