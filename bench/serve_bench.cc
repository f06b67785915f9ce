// Host cost of `tpmsec serve`'s forwarding (issue 33, "Cost": ≤ 20 µs added
// per forwarded command; 16 clients at once within 5 % of one client's
// throughput). The server is the library's ProtectedServer (the one
// CommandWrapper above each client's handle space, tpmsec-server/protected_server/
// protected_server.h) over the embedded libtpms, served on a Unix socket
// by a thread of this process, as `tpmsec serve --socket` serves it; the
// clients are raw socket clients writing one command and reading one
// response, as a TSS on /dev/tpmrm0 does.
//
//   taskset -c 1 build/bench/serve_bench --benchmark_min_time=1 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
//
// * BM_Direct/<cmd> — the command straight to the embedded TPM (the
//   transport the server owns, called while the server is idle): the
//   TPM's work, no resource manager, no wrapper, no socket.
// * BM_Served/<cmd> — the same command through the socket, the server,
//   its wrapper and the client's handle space to the same TPM.
// Both report this process's CPU time per command (CLOCK_PROCESS_CPUTIME_ID,
// every thread: client, server loop, libtpms) as manual time; the
// difference Served − Direct is the host CPU serve adds per forwarded
// command, the wrapper's session work on the command included (and the
// TPM's extra work for that session: HMAC check, parameter encryption).
// * BM_Plain/<cmd> — the same through the socket and a plain resource
//   manager (server::Server, a handle space per client, no wrapper) to the
//   same TPM: Served − Plain is the wrapper's part, Plain − Direct the
//   socket's and the handle space's.
// <cmd>: 0 GetRandom(8) (no session: serve adds an encrypt session),
// 1 PCR_Extend(16) under the password session (serve: HMAC session).
//
// client_us (BM_Served, BM_Plain): the client thread's own CPU per command
// (its send and reads, which a TSS pays on /dev/tpmrm0 as well); the time
// less client_us is the server's side.
// * BM_Clients/threads:N — N clients, each on a connection of its own,
//   sending GetRandom(8) back to back; items_per_second is the served
//   throughput (wall clock). threads:16 against threads:1 is the
//   "16 clients at once" figure.
#include <benchmark/benchmark.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "tpmsec-server/protected_server/protected_server.h"
#include "tpmsec-server/resource_manager/server.h"
#include "tpmsec-server/socket_front/socket_front.h"
#include "tpmsec/command_frame.h"
#include "tpmsec/command_table.h"
#include "tpmsec/constants.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Bytes get_random_frame() {
  Writer count;
  count.u16(8);  // bytesRequested
  const Bytes parameters = *count.finish();
  return *write_command_frame(cc::kGetRandom, {}, {}, parameters, kMaxCommandBytes);
}

// PCR_Extend(16, sha256) with an empty password, as tpm2_pcrextend sends it.
Bytes pcr_extend_frame() {
  const Bytes password =
      *write_auth_entry(AuthEntry{.handle = rh::kPasswordSession, .attributes = attr::kContinueSession},
                        /*command=*/true);
  Writer digests;
  digests.u32(1);
  digests.u16(alg::kSha256);
  digests.bytes(Bytes(32, 0x5a));
  const Bytes parameters = *digests.finish();
  const uint32_t pcr[] = {16};
  const ByteView sessions[] = {password};
  return *write_command_frame(cc::kPcrExtend, pcr, sessions, parameters, kMaxCommandBytes);
}

Bytes command(int which) { return which == 0 ? get_random_frame() : pcr_extend_frame(); }

// The server on its thread, for the whole run.
class Served {
 public:
  static Served& get() {
    static Served* served = new Served;  // never destroyed: benchmark threads may still hold connections
    return *served;
  }
  bool ok() const { return thread_.joinable(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  // A plain resource manager (server::Server, a handle space per client, no
  // wrapper) over the same TPM, on a socket of its own.
  const std::string& plain_path() const { return plain_path_; }
  // The embedded TPM itself, under the server (which owns it).
  Transport& tpm() { return *tpm_; }

 private:
  Served() {
    char tmpl[] = "/tmp/tpmsec-serve-bench-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      error_ = "mkdtemp failed";
      return;
    }
    path_ = std::string(tmpl) + "/tpmrm.sock";
    auto tpm = open_transport("embedded");
    if (!tpm.ok()) {
      error_ = tpm.error().message();
      return;
    }
    tpm_ = tpm->get();
    serve::ServeRequest request;
    request.protect.tpm = "embedded";
    request.server.max_clients_per_uid = 64;
    auto server = serve::ProtectedServer::open(std::move(request), std::move(*tpm));
    if (!server.ok()) {
      error_ = server.error().message();
      return;
    }
    server_ = std::move(*server);
    Status listening = socket_front::listen_unix(server_->server(), path_);
    if (!listening.ok()) {
      error_ = listening.error().message();
      return;
    }
    server::ServerOptions plain;
    plain.max_clients_per_uid = 64;
    auto rm = server::Server::create(*tpm_, std::move(plain));
    if (!rm.ok()) {
      error_ = rm.error().message();
      return;
    }
    plain_ = std::move(*rm);
    plain_path_ = std::string(tmpl) + "/plain.sock";
    listening = socket_front::listen_unix(*plain_, plain_path_);
    if (!listening.ok()) {
      error_ = listening.error().message();
      return;
    }
    plain_thread_ = std::thread([this] { (void)plain_->run(stop_); });
    thread_ = std::thread([this] { (void)server_->server().run(stop_); });
  }

  std::string path_, plain_path_;
  std::string error_;
  std::unique_ptr<server::Server> plain_;
  std::thread plain_thread_;
  std::unique_ptr<serve::ProtectedServer> server_;
  Transport* tpm_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One command written, its response read whole: its response code, or -1.
int64_t round_trip(int fd, const Bytes& cmd, uint8_t* buf, size_t cap) {
  if (::send(fd, cmd.data(), cmd.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(cmd.size())) return -1;
  size_t want = 10;
  for (size_t got = 0; got < want;) {
    ssize_t n = ::read(fd, buf + got, want - got);
    if (n <= 0) return -1;
    got += static_cast<size_t>(n);
    if (got == 10) {
      want = load_be32(buf + 2);
      if (want < 10 || want > cap) return -1;
    }
  }
  return load_be32(buf + 6);
}

void BM_Direct(benchmark::State& state) {
  Served& s = Served::get();
  if (!s.ok()) return state.SkipWithError(s.error().c_str());
  const Bytes cmd = command(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    double t0 = process_cpu_seconds();
    auto r = s.tpm().transmit(cmd);
    double t1 = process_cpu_seconds();
    if (!r.ok() || load_be32(r->data() + 6) != 0) return state.SkipWithError("the TPM refused the command");
    state.SetIterationTime(t1 - t0);
  }
}
BENCHMARK(BM_Direct)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

void served(benchmark::State& state, bool wrapped) {
  Served& s = Served::get();
  if (!s.ok()) return state.SkipWithError(s.error().c_str());
  int fd = connect_unix(wrapped ? s.path() : s.plain_path());
  if (fd < 0) return state.SkipWithError("cannot connect to the server's socket");
  const Bytes cmd = command(static_cast<int>(state.range(0)));
  uint8_t buf[4096];
  double client = 0;  // the client thread's own CPU: its send and reads, as any TSS pays on /dev/tpmrm0
  for (auto _ : state) {
    double c0 = thread_cpu_seconds();
    double t0 = process_cpu_seconds();
    int64_t rc = round_trip(fd, cmd, buf, sizeof(buf));
    double t1 = process_cpu_seconds();
    client += thread_cpu_seconds() - c0;
    if (rc != 0) {
      ::close(fd);
      return state.SkipWithError("the server refused the command");
    }
    state.SetIterationTime(t1 - t0);
  }
  ::close(fd);
  // The server's side (its loop, the space, the wrapper, libtpms): the
  // process's time less the client thread's, per command.
  state.counters["client_us"] =
      benchmark::Counter(client * 1e6 / static_cast<double>(state.iterations()), benchmark::Counter::kDefaults);
}
void BM_Served(benchmark::State& state) { served(state, true); }
BENCHMARK(BM_Served)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
void BM_Plain(benchmark::State& state) { served(state, false); }
BENCHMARK(BM_Plain)->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_Clients(benchmark::State& state) {
  Served& s = Served::get();
  if (!s.ok()) return state.SkipWithError(s.error().c_str());
  const Bytes cmd = get_random_frame();
  uint8_t buf[4096];
  int fd = -1;
  for (auto _ : state) {
    if (fd < 0 && (fd = connect_unix(s.path())) < 0) return state.SkipWithError("cannot connect");
    if (round_trip(fd, cmd, buf, sizeof(buf)) != 0) {
      ::close(fd);
      return state.SkipWithError("the server refused the command");
    }
  }
  if (fd >= 0) ::close(fd);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Clients)->Threads(1)->Threads(16)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tpmsec

BENCHMARK_MAIN();
