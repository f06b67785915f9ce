#include "soak/scripts.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "soak/frames.h"

namespace tpmsec::soak {
namespace {

constexpr gid_t kNogroup = 65534;  // the socket's group: every uid of the soak may connect

// One client's life: its connection and the report it fills in.
class Client {
 public:
  Client(Connection& c, Report& r) : c_(c), r_(r) {}
  // The answer, counted; nullopt (counted unanswered) when none came.
  std::optional<Bytes> run(ByteView command) {
    ++r_.sent;
    auto answer = c_.transact(command);
    if (!answer || !response_code(*answer)) {
      ++r_.unanswered;
      return std::nullopt;
    }
    ++r_.answered;
    if (uint32_t rc = *response_code(*answer)) r_.count_rc(rc);
    return answer;
  }
  uint32_t create(ByteView command) {
    auto a = run(command);
    return a ? response_handle(*a) : 0;
  }
  // Writes the report, sends `command` (whole or its first half) and dies unanswered.
  [[noreturn]] void die_in_flight(int report_fd, ByteView command) {
    (void)!::write(report_fd, &r_, sizeof(r_));
    c_.send_only(command);
    ::raise(SIGKILL);
    ::_exit(1);
  }

 private:
  Connection& c_;
  Report& r_;
};

void reads(Client& c, uint32_t rounds) {
  for (uint32_t i = 0; i < rounds; ++i) {
    if (!c.run(i % 2 ? pcr_read() : get_random(16))) return;
  }
}

void objects(Client& c, uint32_t rounds, bool leave) {
  uint32_t primary = c.create(create_primary());
  if (!primary) return;
  for (uint32_t i = 0; i < rounds; ++i) {
    auto created = c.run(create_sealed(primary));
    if (!created || response_code(*created) != 0u) break;
    uint32_t object = c.create(load(primary, *created));
    if (!object) break;
    if (leave && i + 1 == rounds) return;  // the last object and the primary stay loaded
    c.run(flush_context(object));
  }
  if (!leave) c.run(flush_context(primary));
}

void save_session(Client& c, Report& r) {
  uint32_t session = c.create(start_hmac_session());
  if (!session) return;
  auto saved = c.run(context_save(session));
  if (!saved || response_code(*saved) != 0u || saved->size() > sizeof(r.context)) return;
  std::memcpy(r.context, saved->data(), saved->size());
  r.context_size = static_cast<uint16_t>(saved->size());
}

void load_session(Client& c, const Bytes& context) {
  if (uint32_t session = c.create(context_load(context))) c.run(flush_context(session));
}

void run_plan(const Plan& plan, Connection& conn, Report& r, int report_fd) {
  Client c(conn, r);
  switch (plan.script) {
    case Script::kReads:
      return reads(c, plan.rounds);
    case Script::kObjects:
      return objects(c, plan.rounds, false);
    case Script::kObjectsLeft:
      return objects(c, plan.rounds, true);
    case Script::kSaveSession:
      return save_session(c, r);
    case Script::kLoadSession:
      return load_session(c, plan.context);
    case Script::kKilledInCommand:
      if (c.create(start_hmac_session()) && c.create(create_primary())) c.die_in_flight(report_fd, create_primary());
      return;
    case Script::kKilledInFrame: {
      if (!c.create(start_hmac_session())) return;
      Bytes half = create_primary();
      half.resize(half.size() / 2);
      c.die_in_flight(report_fd, half);
    }
  }
}

}  // namespace

const char* script_name(Script s) {
  switch (s) {
    case Script::kReads:
      return "reads";
    case Script::kObjects:
      return "objects";
    case Script::kObjectsLeft:
      return "objects left loaded";
    case Script::kSaveSession:
      return "session saved";
    case Script::kLoadSession:
      return "session loaded";
    case Script::kKilledInCommand:
      return "killed in a command";
    case Script::kKilledInFrame:
      return "killed in a frame";
  }
  return "?";
}

void Report::count_rc(uint32_t rc) {
  for (int i = 0; i < kKinds; ++i) {
    if (rc_counts[i] == 0) rcs[i] = rc;
    if (rcs[i] == rc) {
      ++rc_counts[i];
      return;
    }
  }
  ++rc_overflow;
}

pid_t start_client(const Plan& plan, const std::string& socket, int* report_fd) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    ::signal(SIGPIPE, SIG_IGN);
    static Report r;  // a fresh process: zero
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNogroup) != 0 || ::setuid(plan.uid) != 0) ::_exit(2);
    auto conn = plan.front == Front::kSocket ? connect_socket(socket) : connect_dbus();
    if (!conn) {
      r.refused = 1;
    } else {
      run_plan(plan, *conn, r, p[1]);
    }
    (void)!::write(p[1], &r, sizeof(r));
    conn.reset();
    ::_exit(0);
  }
  ::close(p[1]);
  if (pid < 0) {
    ::close(p[0]);
    return -1;
  }
  *report_fd = p[0];
  return pid;
}

Report read_report(int fd) {
  Report r;
  if (::read(fd, &r, sizeof(r)) != static_cast<ssize_t>(sizeof(r))) r = Report{};
  ::close(fd);
  return r;
}

}  // namespace tpmsec::soak
