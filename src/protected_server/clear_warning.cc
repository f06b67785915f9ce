#include "protected_server/clear_warning.h"

#include <fmt/format.h>

namespace tpmsec::serve {

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
