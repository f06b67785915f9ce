// Reports: where write_output() puts them (include/tpmsec/host/files.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <variant>

#include <fmt/format.h>

#include "file_replace.h"
#include "tpmsec/host/files.h"

namespace tpmsec::files {

using internal::Fd;

bool trusted_dir(const struct stat& st) {
  return (st.st_uid == 0 || st.st_uid == ::geteuid()) && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

namespace {

std::string identity_of(const struct stat& st) { return fmt::format("{}:{}", st.st_dev, st.st_ino); }

struct Decision {
  OutputPlan plan;
  bool follow = false;  // open plan.file through its final symlink (in place only)
};

// The decision for `path`, or why it cannot be written.
std::variant<Decision, std::string> decide(const std::string& path) {
  struct stat st {};
  if (path == "-") {
    std::string identity = "-";
    if (::fstat(STDOUT_FILENO, &st) == 0) identity = identity_of(st);  // the same output as /dev/stdout
    return Decision{OutputPlan{OutputPlan::Kind::kInPlace, path, identity}, false};
  }
  auto parts = internal::split(path);
  if (!parts) {
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return std::string("is a directory");
    return std::string("names no file");
  }
  Fd dir(::open(parts->dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return fmt::format("directory {} does not exist", parts->dir);
    return fmt::format("directory {}: {}", parts->dir, std::strerror(errno));
  }
  struct stat dir_st {};
  if (::fstat(dir.get(), &dir_st) != 0) return std::string(std::strerror(errno));
  auto replace = [&](std::string file, const std::string& file_dir,
                     std::string identity) -> std::variant<Decision, std::string> {
    if (::access(file_dir.c_str(), W_OK) != 0) return fmt::format("directory {} is not writable", file_dir);
    return Decision{OutputPlan{OutputPlan::Kind::kReplace, std::move(file), std::move(identity)}, false};
  };
  auto in_place = [&](const struct stat& target, bool follow) -> std::variant<Decision, std::string> {
    if (::access(path.c_str(), W_OK) != 0) return fmt::format("not writable: {}", std::strerror(errno));
    return Decision{OutputPlan{OutputPlan::Kind::kInPlace, path, identity_of(target)}, follow};
  };

  struct stat lst {};
  if (::fstatat(dir.get(), parts->name.c_str(), &lst, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return std::string(std::strerror(errno));
    std::error_code ec;
    std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
    return replace(path, parts->dir, ec ? path : canonical);
  }
  if (S_ISDIR(lst.st_mode)) return std::string("is a directory");
  if (S_ISREG(lst.st_mode)) return replace(path, parts->dir, identity_of(lst));
  if (!S_ISLNK(lst.st_mode)) return in_place(lst, false);  // FIFO, device, socket

  struct stat target {};
  const bool target_exists = ::fstatat(dir.get(), parts->name.c_str(), &target, 0) == 0;
  if (!trusted_dir(dir_st)) {
    // Another user may have planted this link: never followed. A link to a
    // file (or to nothing) is replaced; one to a device or FIFO is refused,
    // since replacing it would not write where the caller meant either.
    if (target_exists && !S_ISREG(target.st_mode) && !S_ISDIR(target.st_mode)) {
      return fmt::format("a symbolic link in {}, which other users can write, to a device or FIFO: refused",
                         parts->dir);
    }
    return replace(path, parts->dir, identity_of(lst));
  }
  // The caller's (or root's) own link: followed, as a user expects of
  // ~/report.json -> runs/5.json or /dev/stdout.
  if (!target_exists) return std::string("a symbolic link to a missing file");
  if (S_ISDIR(target.st_mode)) return std::string("is a directory");
  if (!S_ISREG(target.st_mode)) return in_place(target, true);
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return std::string(std::strerror(errno));
  std::string resolved = real;
  std::free(real);
  auto real_parts = internal::split(resolved);
  if (!real_parts) return std::string("is a directory");
  return replace(resolved, real_parts->dir, identity_of(target));
}

}  // namespace

Result<OutputPlan> plan_output(const std::string& path) {
  auto d = decide(path);
  if (auto* why = std::get_if<std::string>(&d)) return usage_error(fmt::format("{}: {}", path, *why));
  return std::get<Decision>(d).plan;
}

namespace {

// Opens `file` with `flags` (and `mode`, when it creates it), refuses it when
// `refused` gives a reason for the opened file, writes `content` and closes:
// the reason it failed, or none.
std::optional<std::string> write_opened(const std::string& file, int flags, mode_t mode, std::string_view content,
                                        std::string_view (*refused)(const struct stat&)) {
  Fd fd(::open(file.c_str(), flags, mode));
  // O_NOFOLLOW's ELOOP is a link at the name itself: said as the refusal it is.
  if (fd.get() < 0 && errno == ELOOP && (flags & O_NOFOLLOW)) return "a symbolic link: refused, never followed";
  if (fd.get() < 0) return std::strerror(errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return std::strerror(errno);
  if (std::string_view why = refused(st); !why.empty()) return std::string(why);
  int err = internal::write_all(fd.get(), content);
  if (int c = fd.close(); err == 0) err = c;
  if (err != 0) return std::strerror(err);
  return std::nullopt;
}

}  // namespace

Status append_output(const std::string& path, std::string_view content, mode_t new_mode) {
  auto fail = [&](const std::string& why) {
    return runtime_error(fmt::format("cannot write {}: {}", path == "-" ? "standard output" : path, why));
  };
  if (path == "-") return write_output(path, content, new_mode);
  auto d = decide(path);
  if (auto* why = std::get_if<std::string>(&d)) return fail(*why);
  const Decision& decision = std::get<Decision>(d);
  int flags = O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC | (decision.follow ? 0 : O_NOFOLLOW);
  if (decision.plan.kind == OutputPlan::Kind::kReplace) flags |= O_CREAT;
  // A link where none is followed (planted since it was looked at) fails
  // here with ELOOP: never written through.
  auto refused = [](const struct stat& st) -> std::string_view { return S_ISDIR(st.st_mode) ? "is a directory" : ""; };
  if (auto why = write_opened(decision.plan.file, flags, new_mode, content, refused)) return fail(*why);
  return ok_status();
}

Status write_output(const std::string& path, std::string_view content, mode_t new_mode) {
  auto fail = [&](const std::string& why) {
    return runtime_error(fmt::format("cannot write {}: {}", path == "-" ? "standard output" : path, why));
  };
  if (path == "-") {
    std::fflush(stdout);  // what was printed before comes first
    if (int err = internal::write_all(STDOUT_FILENO, content)) return fail(std::strerror(err));
    return ok_status();
  }
  auto d = decide(path);
  if (auto* why = std::get_if<std::string>(&d)) return fail(*why);
  const Decision& decision = std::get<Decision>(d);
  const std::string& file = decision.plan.file;

  if (decision.plan.kind == OutputPlan::Kind::kInPlace) {
    // Swapped for a regular file since it was looked at: such a file is only
    // ever replaced, never written in place.
    auto refused = [](const struct stat& st) -> std::string_view {
      return S_ISREG(st.st_mode) ? "changed while it was being opened" : "";
    };
    int flags = O_WRONLY | O_NOCTTY | O_CLOEXEC | (decision.follow ? 0 : O_NOFOLLOW);
    if (auto why = write_opened(file, flags, 0, content, refused)) return fail(*why);
    return ok_status();
  }

  auto parts = internal::split(file);
  if (!parts) return fail("is a directory");
  Fd dir(::open(parts->dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return fail(std::strerror(errno));
  struct stat old {};
  const bool keep = ::fstatat(dir.get(), parts->name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode);
  internal::ReplaceOptions options;
  options.mode = new_mode;
  options.keep = keep ? &old : nullptr;
  if (int err = internal::replace_at(dir.get(), parts->name, content, options)) return fail(std::strerror(err));
  return ok_status();
}

}  // namespace tpmsec::files
