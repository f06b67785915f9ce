// What one churning client of the soak (bench/soak) does in its life, and
// what it reports back to the bench before it exits (or is killed).
#ifndef TPMSEC_BENCH_SOAK_SCRIPTS_H_
#define TPMSEC_BENCH_SOAK_SCRIPTS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "soak/client.h"
#include "tpmsec/bytes.h"

namespace tpmsec::soak {

enum class Script : uint8_t {
  kReads,            // GetRandom and PCR_Read, `rounds` of them
  kObjects,          // CreatePrimary, `rounds` x (Create, Load, FlushContext), FlushContext of the primary
  kObjectsLeft,      // the same, but exits with the primary and the last object loaded
  kSaveSession,      // StartAuthSession, ContextSave, exit: the session is kept for its uid
  kLoadSession,      // ContextLoad of a context another process saved, FlushContext
  kKilledInCommand,  // a session and a primary, then SIGKILL with a CreatePrimary sent, unanswered
  kKilledInFrame,    // a session, then SIGKILL with half a CreatePrimary written
};
const char* script_name(Script s);

struct Plan {
  Script script = Script::kReads;
  Front front = Front::kSocket;
  uid_t uid = 0;
  uint32_t rounds = 0;
  Bytes context;  // kLoadSession: the ContextSave response it loads
};

// What a client reports through its pipe: one write before it exits or is killed.
struct Report {
  static constexpr int kKinds = 16;
  uint32_t sent = 0;                // commands written whose answer it waited for
  uint32_t answered = 0;            // of those, answered (any response code)
  uint32_t unanswered = 0;          // of those, never answered (closed, or nothing in 120 s)
  uint32_t refused = 0;             // 1 when the front refused the connection
  uint32_t rcs[kKinds] = {};        // response codes other than success…
  uint32_t rc_counts[kKinds] = {};  // …and how often each came
  uint32_t rc_overflow = 0;
  uint16_t context_size = 0;  // kSaveSession: the ContextSave response
  uint8_t context[2048] = {};
  void count_rc(uint32_t rc);
};

// Forks a client of `plan.uid` (group nogroup) running `plan`; its report
// comes on *report_fd. The caller has no other thread.
pid_t start_client(const Plan& plan, const std::string& socket, int* report_fd);
// The report of an ended client (all zero when it wrote none).
Report read_report(int fd);

}  // namespace tpmsec::soak

#endif  // TPMSEC_BENCH_SOAK_SCRIPTS_H_
