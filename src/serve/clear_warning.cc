#include "serve/clear_warning.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

namespace tpmsec::serve {

std::string program_name(uint32_t pid) {
  if (pid == 0) return "?";
  const std::string path = fmt::format("/proc/{}/comm", pid);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
  if (fd < 0) return "?";
  char buf[64];  // the kernel's TASK_COMM_LEN is 16
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n <= 0) return "?";
  std::string name(buf, static_cast<size_t>(n));
  while (!name.empty() && name.back() == '\n') name.pop_back();
  for (char& c : name) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return name.empty() ? "?" : name;
}

std::string clear_warning(std::string_view command, uint32_t code, const ClearNote& note,
                          const server::PeerIdentity& peer, std::string_view program) {
  const std::string uid = peer.uid ? std::to_string(*peer.uid) : std::string("?");
  const std::string pid = peer.pid ? std::to_string(*peer.pid) : std::string("?");
  const std::string_view fix = note.callers_session
                                   ? "run serve with --strict to refuse it, or have the program protect it with a "
                                     "salted session of its own (tpm2-tools: a session started with --key-context)"
                                   : "run serve with --strict to refuse it";
  return fmt::format(
      "<4>{} (0x{:x}) from uid {} pid {} ({}) put a secret on the bus in clear: {}; why: {}; fix: {} (told once "
      "per client and command)",
      command, code, uid, pid, program, note.what, note.why, fix);
}

}  // namespace tpmsec::serve
