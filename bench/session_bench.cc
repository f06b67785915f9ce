// What protecting a PCR_Extend costs the host, and what it costs in total on
// the in-process reference TPM (libtpms). Run pinned to one CPU:
//
//   taskset -c 1 build-bench/bench/session_bench --benchmark_min_time=0.5
//       --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
//
// Method (docs/performance.md has the figures):
//
// * BM_ProtectedExtendHostCpu — host CPU of one protected PCR_Extend with no
//   TPM at all: pcr_extend() through the real pipeline and a real HmacSession
//   (fresh nonceCaller from the system RNG, cpHash, command HMAC, command
//   assembly, response parsing, rpHash, response HMAC check, nonce roll).
//   The session key is genuine: a salted session is started on the embedded
//   TPM once and one protected extend is accepted by it. The "TPM" the
//   pipeline then talks to is ScriptedTpm, which answers each command with a
//   response that verifies: it reads the nonceCaller from the command and
//   computes the response HMAC under the recorded key. That TPM-side HMAC is
//   not host work, so it is measured on its own right before and after the
//   timed loop (same process, same CPU, same inputs) and subtracted:
//   counter host_us = CPU time per iteration − tpm_side_us (both this
//   thread's CPU time, robust to other load on the CPU). The subtraction is
//   only as good as the noise of the two; bench/callgrind.sh gives an exact
//   instruction count with the scripted TPM's work switched out of collection.
//   Before timing, the harness checks that the command HMACs it receives are
//   the ones the TPM would accept and that a tampered response is refused,
//   so the timed path is the one that really authenticates.
//   Each nonceCaller comes from crypto::nonce_random(), as in the library.
// * BM_ProtectedExtendHostCpuSystemNonces — the same with one RAND_bytes call
//   per nonceCaller (crypto::system_random()), as before nonce_random().
// * BM_PlainExtendHostCpu — the same pipeline with password authorization:
//   what the pipeline costs without protection.
// * BM_ScriptedTpmResponse — the subtracted TPM-side work alone.
// * BM_ProtectedExtendEmbedded / BM_PlainExtendEmbedded — a whole extend on
//   libtpms in-process, continued session vs password. A TimingTransport
//   around the embedded transport splits each into tpm_us (inside
//   TPMLIB_Process) and host_us (the rest); see extend_embedded.
// * BM_SessionStartEmbedded / BM_SessionStartHost — SessionFactory::start:
//   ContextLoad(null key), salted StartAuthSession (ephemeral ECDH, KDFe,
//   KDFa), FlushContext(null key). Manual time = CPU time of the whole start,
//   or of the start minus the time inside libtpms. Flushing the session
//   afterwards is not timed.
// * BM_SessionStartCrypto — only the salt (ECDH + KDFe) and the session key (KDFa).
//
// `session_bench --callgrind=N` (under valgrind: bench/callgrind.sh) counts
// instructions instead of benchmarking: N host-only protected and plain
// extends, N scripted responses, N embedded extends with and without
// libtpms's share, N/10 salt+key derivations and session starts (host
// share), each as its own callgrind dump.
#include <benchmark/benchmark.h>
#include <openssl/aes.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "testing/transport_doubles.h"
#include "timing_transport.h"
#include "tpmsec/crypto.h"
#include "tpmsec/hmac_session.h"
#include "tpmsec/pcr.h"
#include "tpmsec/salt.h"
#include "tpmsec/session_factory.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TPMSEC_HAVE_CALLGRIND 1
#else
#define CALLGRIND_TOGGLE_COLLECT ((void)0)
#define CALLGRIND_ZERO_STATS ((void)0)
#define CALLGRIND_DUMP_STATS_AT(name) (void)(name)
#endif

namespace tpmsec {
// Declared a friend by hmac_session.h: the one reader of a live session's key.
struct SessionKeyForBenchmark {
  static ByteView of(const HmacSession& s) { return s.session_key(); }
};
}  // namespace tpmsec

namespace tpmsec::bench {

namespace {

constexpr uint32_t kPcr = 16;
constexpr uint32_t kPcrExtendCode = cmd::PcrExtend::kInfo.code;

[[noreturn]] void die(std::string_view what, const Error& error) {
  std::fprintf(stderr, "session_bench: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               error.message().c_str());
  std::exit(1);
}
[[noreturn]] void die(std::string_view what) {
  std::fprintf(stderr, "session_bench: %.*s\n", static_cast<int>(what.size()), what.data());
  std::exit(1);
}

// ---- The embedded TPM: one per process (libtpms is a singleton) ----

// Whether instruction counting skips what happens inside the TPM (the
// embedded libtpms, or ScriptedTpm's response): set only by --callgrind.
bool g_exclude_tpm_from_callgrind = false;

// The callback of an InterposingTransport (testing/transport_doubles.h):
// switches callgrind collection off around the inner transport while
// g_exclude_tpm_from_callgrind is set; otherwise a plain pass-through.
Result<Bytes> callgrind_gate(ByteView command, Transport& inner) {
  const bool gate = g_exclude_tpm_from_callgrind;
  if (gate) CALLGRIND_TOGGLE_COLLECT;
  Result<Bytes> response = inner.transmit(command);
  if (gate) CALLGRIND_TOGGLE_COLLECT;
  return response;
}

struct EmbeddedTpm {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<TimingTransport> timing;
  std::unique_ptr<testing::InterposingTransport> gate;
  std::unique_ptr<Tpm> tpm;
  std::unique_ptr<SessionFactory> factory;  // pinned ECC null key
};

EmbeddedTpm& embedded() {
  static EmbeddedTpm e = [] {
    EmbeddedTpm x;
    auto t = open_embedded();
    if (!t.ok()) die("open_embedded", t.error());
    x.transport = std::move(*t);
    x.timing = std::make_unique<TimingTransport>(*x.transport);
    x.gate = std::make_unique<testing::InterposingTransport>(*x.timing, callgrind_gate);
    x.tpm = std::make_unique<Tpm>(*x.gate);
    ProtectionConfig measuring;
    measuring.trust_first_use = true;  // measurement: the embedded TPM behind a timing decorator
    auto f = SessionFactory::create(*x.tpm, measuring);
    if (!f.ok()) die("SessionFactory::create", f.error());
    x.factory = std::move(*f);
    return x;
  }();
  return e;
}

// ---- A genuine session key, recorded once from the embedded TPM ----

struct RecordedSession {
  uint32_t handle = 0;
  SecretBytes session_key;
  Bytes nonce_tpm;
};

const RecordedSession& recorded_session() {
  static RecordedSession r = [] {
    EmbeddedTpm& e = embedded();
    auto s = e.factory->start(attr::kContinueSession);
    if (!s.ok()) die("starting the session to record", s.error());
    // The TPM accepting a protected extend proves the key is the one it derived.
    Status st = pcr_extend(*e.tpm, alg::kSha256, kPcr, Bytes(32, 0x11), Auth{s->get(), {}});
    if (!st.ok()) die("protected extend on the embedded TPM", st.error());
    RecordedSession out;
    out.handle = (*s)->handle();
    out.session_key = SecretBytes(SessionKeyForBenchmark::of(**s));
    out.nonce_tpm.assign((*s)->nonce_tpm().begin(), (*s)->nonce_tpm().end());
    return out;  // the live session is flushed here
  }();
  return r;
}

// ---- ScriptedTpm: the TPM's half of PCR_Extend, without a TPM ----

// Command layout of PCR_Extend(PCR, one SHA-256 digest) with one session
// whose nonces are 32 bytes (Part 3 §22.2; Part 1 §18.6).
constexpr size_t kNonceSize = 32;
constexpr size_t kOffHandle = 10;
constexpr size_t kOffAuthSize = 14;
constexpr size_t kOffSessionHandle = 18;
constexpr size_t kOffNonce = 24;                                               // after the nonce's u16 size
constexpr size_t kOffAttributes = kOffNonce + kNonceSize;                      // 56
constexpr size_t kOffHmac = kOffAttributes + 1 + 2;                            // 59
constexpr size_t kOffParameters = kOffHmac + kNonceSize;                       // 91
constexpr size_t kProtectedCommandSize = kOffParameters + 4 + 2 + 32;          // 129
constexpr size_t kPlainCommandSize = 10 + 4 + 4 + 4 + 2 + 1 + 2 + 4 + 2 + 32;  // 65

// The response: header, parameterSize 0, TPM2B nonceTPM, attributes, TPM2B hmac.
constexpr size_t kRspNonce = 10 + 4 + 2;                          // 16
constexpr size_t kRspAttributes = kRspNonce + kNonceSize;         // 48
constexpr size_t kRspHmac = kRspAttributes + 1 + 2;               // 51
constexpr size_t kProtectedResponseSize = kRspHmac + kNonceSize;  // 83

// The responder of a ScriptedTransport (testing/transport_doubles.h), behind
// the callgrind gate (HostHarness).
class ScriptedTpm {
 public:
  enum class Mode { kHmacSession, kPassword };

  ScriptedTpm(Mode mode, const RecordedSession& session)
      : mode_(mode), handle_(session.handle), key_(session.session_key.clone()), nonce_tpm_(session.nonce_tpm) {
    // rpHash of a successful PCR_Extend: H(rc 0 || commandCode), no parameters.
    auto rp = compute_rp_hash(alg::kSha256, 0, kPcrExtendCode, {});
    if (!rp.ok()) die("rpHash", rp.error());
    rp_hash_ = std::move(*rp);
    if (nonce_tpm_.size() != kNonceSize) die("recorded nonceTPM is not 32 bytes");
  }

  // Checks every command as the TPM would (layout, cpHash, command HMAC).
  void set_check_commands(bool on) { check_ = on; }
  // Corrupts the HMAC of the next response.
  void tamper_next() { tamper_next_ = true; }
  ByteView nonce_tpm() const { return nonce_tpm_; }
  const Bytes& last_command() const { return last_command_; }
  void set_record_commands(bool on) { record_ = on; }

  // The TPM's work for one command: what is subtracted from host time.
  Result<Bytes> respond(ByteView command) {
    if (record_) last_command_.assign(command.begin(), command.end());
    if (mode_ == Mode::kPassword) {
      if (command.size() != kPlainCommandSize) return runtime_error("scripted TPM: unexpected command size");
      // Success, parameterSize 0, empty nonce, continueSession, empty hmac.
      static constexpr uint8_t kPlain[] = {0x80, 0x02, 0, 0, 0, 19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
      return Bytes(std::begin(kPlain), std::end(kPlain));
    }
    if (command.size() != kProtectedCommandSize || load_be32(command.data() + kOffSessionHandle) != handle_ ||
        command[kOffNonce - 2] != 0 || command[kOffNonce - 1] != kNonceSize) {
      return runtime_error("scripted TPM: not a PCR_Extend with this session");
    }
    ByteView nonce_caller = command.subspan(kOffNonce, kNonceSize);
    uint8_t attributes = command[kOffAttributes];
    if (check_) TPMSEC_RETURN_IF_ERROR(check_command(command));

    // A fresh nonceTPM (a counter: the host cannot tell, and it costs nothing).
    for (size_t i = 0; i < 8 && ++nonce_tpm_[i] == 0; ++i) {
    }
    Bytes rsp(kProtectedResponseSize);
    rsp[0] = 0x80;
    rsp[1] = 0x02;
    store_be32(rsp.data() + 2, kProtectedResponseSize);
    // rc 0 and parameterSize 0 are already zero.
    rsp[kRspNonce - 2] = 0;
    rsp[kRspNonce - 1] = kNonceSize;
    std::memcpy(rsp.data() + kRspNonce, nonce_tpm_.data(), kNonceSize);
    rsp[kRspAttributes] = attributes;
    rsp[kRspHmac - 2] = 0;
    rsp[kRspHmac - 1] = kNonceSize;
    TPMSEC_ASSIGN_OR_RETURN(Bytes mac, crypto::hmac(alg::kSha256, key_.view(),
                                                    {rp_hash_, nonce_tpm_, nonce_caller, ByteView(&attributes, 1)}));
    std::memcpy(rsp.data() + kRspHmac, mac.data(), kNonceSize);
    if (tamper_next_) {
      rsp[kRspHmac] ^= 1;
      tamper_next_ = false;
    }
    return rsp;
  }

 private:
  Status check_command(ByteView command) const {
    Reader r(command);
    bool ok = r.u16("tag") == st::kSessions && r.u32("size") == command.size() &&
              r.u32("commandCode") == kPcrExtendCode && r.u32("handle") == kPcr &&
              r.u32("authSize") == 4 + 2 + kNonceSize + 1 + 2 + kNonceSize;
    if (!ok) return integrity_error("scripted TPM: malformed PCR_Extend");
    ByteView hmac = command.subspan(kOffHmac, kNonceSize);
    ByteView params = command.subspan(kOffParameters);
    uint8_t name[4];
    store_be32(name, kPcr);
    uint8_t cc[4];
    store_be32(cc, kPcrExtendCode);
    TPMSEC_ASSIGN_OR_RETURN(Bytes cp_hash, crypto::hash(alg::kSha256, {cc, name, params}));
    TPMSEC_ASSIGN_OR_RETURN(Bytes expected, crypto::hmac(alg::kSha256, key_.view(),
                                                         {cp_hash, command.subspan(kOffNonce, kNonceSize), nonce_tpm_,
                                                          command.subspan(kOffAttributes, 1)}));
    if (!crypto::constant_time_equal(expected, hmac)) return integrity_error("scripted TPM: command HMAC is wrong");
    return ok_status();
  }

  Mode mode_;
  uint32_t handle_;
  SecretBytes key_;
  Bytes nonce_tpm_;
  Bytes rp_hash_;
  Bytes last_command_;
  bool check_ = false;
  bool tamper_next_ = false;
  bool record_ = false;
};

// The pipeline and a session over a ScriptedTpm, validated before use.
struct HostHarness {
  explicit HostHarness(ScriptedTpm::Mode mode, crypto::RandomSource* random = nullptr)
      : scripted(mode, recorded_session()), gate(transport, callgrind_gate), tpm(gate), random(random) {
    transport.set_recording(false);
    transport.respond_with([this](ByteView command) { return scripted.respond(command); });
    const RecordedSession& rec = recorded_session();
    if (mode == ScriptedTpm::Mode::kPassword) {
      if (!extend().ok()) die("plain extend through the scripted TPM");
      return;
    }
    // 1. The command HMACs are the ones the TPM checks.
    scripted.set_check_commands(true);
    session = new_session(rec);
    for (int i = 0; i < 3; ++i) {
      Status st = extend();
      if (!st.ok()) die("protected extend through the scripted TPM", st.error());
    }
    // 2. A response with a wrong HMAC is refused (the timed path authenticates).
    scripted.tamper_next();
    Status st = extend();
    if (st.ok() || st.error().kind() != ErrorKind::kIntegrity) die("a tampered response HMAC was accepted");
    // 3. The session for timing, on the scripted TPM's current nonce.
    session = new_session(rec);
    for (int i = 0; i < 3; ++i) {
      if (!extend().ok()) die("protected extend through the scripted TPM");
    }
    scripted.set_check_commands(false);
  }

  std::unique_ptr<HmacSession> new_session(const RecordedSession& rec) {
    Bytes nonce(scripted.nonce_tpm().begin(), scripted.nonce_tpm().end());
    // No Tpm*: the scripted TPM holds no handle to flush.
    return std::make_unique<HmacSession>(nullptr, rec.handle, alg::kSha256, SymDef::aes128_cfb(),
                                         rec.session_key.clone(), std::move(nonce), Bytes(), attr::kContinueSession,
                                         random);
  }

  Status extend() {
    Auth auth = session ? Auth{session.get(), {}} : Auth::password();
    return pcr_extend(tpm, alg::kSha256, kPcr, digest, auth);
  }

  // CPU nanoseconds per scripted response to the last command the pipeline sent.
  double tpm_side_cpu_ns(int rounds) {
    scripted.set_record_commands(true);
    if (!extend().ok()) die("protected extend through the scripted TPM");
    scripted.set_record_commands(false);
    Bytes command = scripted.last_command();
    int64_t start = thread_cpu_ns();
    for (int i = 0; i < rounds; ++i) {
      auto r = scripted.respond(command);
      benchmark::DoNotOptimize(r);
    }
    double ns = static_cast<double>(thread_cpu_ns() - start) / rounds;
    // The responses above moved the scripted nonceTPM on; restart the session from it.
    session = new_session(recorded_session());
    return ns;
  }

  HostHarness(const HostHarness&) = delete;
  HostHarness& operator=(const HostHarness&) = delete;

  ScriptedTpm scripted;
  testing::ScriptedTransport transport{"scripted"};
  testing::InterposingTransport gate;  // callgrind_gate around the scripted TPM's work
  Tpm tpm;
  crypto::RandomSource* random;  // nullptr: the library's default (crypto::nonce_random())
  std::unique_ptr<HmacSession> session;
  Bytes digest = Bytes(32, 0x5a);
};

// With --benchmark_repetitions, each benchmark also reports the minimum over
// the repetitions: on a shared CPU the least disturbed run is the best
// estimate of the intrinsic cost (the median is reported too).
double min_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
#define TPMSEC_BENCHMARK(fn) BENCHMARK(fn)->ComputeStatistics("min", min_of)

void set_per_op_counter(benchmark::State& state, const char* name, double total_ns) {
  state.counters[name] = benchmark::Counter(total_ns / 1e3, benchmark::Counter::kAvgIterations);
}

// ---- Host-only benchmarks ----

void protected_extend_host_cpu(benchmark::State& state, crypto::RandomSource* random) {
  HostHarness h(ScriptedTpm::Mode::kHmacSession, random);
  constexpr int kCalibration = 20000;
  double tpm_side_before = h.tpm_side_cpu_ns(kCalibration);
  int64_t cpu_start = thread_cpu_ns();
  for (auto _ : state) {
    Status st = h.extend();
    if (!st.ok()) {
      state.SkipWithError(st.error().message().c_str());
      break;
    }
  }
  double cpu_ns = static_cast<double>(thread_cpu_ns() - cpu_start);
  double tpm_side = (tpm_side_before + h.tpm_side_cpu_ns(kCalibration)) / 2;
  double n = static_cast<double>(state.iterations());
  state.counters["tpm_side_us"] = tpm_side / 1e3;
  state.counters["host_us"] = (cpu_ns / n - tpm_side) / 1e3;
}

void BM_ProtectedExtendHostCpu(benchmark::State& state) { protected_extend_host_cpu(state, nullptr); }
TPMSEC_BENCHMARK(BM_ProtectedExtendHostCpu);

// The same with one RAND_bytes call per nonceCaller (the library before
// crypto::nonce_random()): what the buffered nonce source saves.
void BM_ProtectedExtendHostCpuSystemNonces(benchmark::State& state) {
  protected_extend_host_cpu(state, &crypto::system_random());
}
TPMSEC_BENCHMARK(BM_ProtectedExtendHostCpuSystemNonces);

void BM_PlainExtendHostCpu(benchmark::State& state) {
  HostHarness h(ScriptedTpm::Mode::kPassword);
  for (auto _ : state) {
    Status st = h.extend();
    if (!st.ok()) {
      state.SkipWithError(st.error().message().c_str());
      break;
    }
  }
}
TPMSEC_BENCHMARK(BM_PlainExtendHostCpu);

void BM_ScriptedTpmResponse(benchmark::State& state) {
  HostHarness h(ScriptedTpm::Mode::kHmacSession);
  h.scripted.set_record_commands(true);
  if (!h.extend().ok()) die("protected extend through the scripted TPM");
  Bytes command = h.scripted.last_command();
  for (auto _ : state) {
    auto r = h.scripted.respond(command);
    benchmark::DoNotOptimize(r);
  }
}
TPMSEC_BENCHMARK(BM_ScriptedTpmResponse);

// ---- Whole extends on the embedded TPM ----

// Counters tpm_us / host_us split this thread's CPU time per extend in the
// proportion of wall time inside / outside TPMLIB_Process: a CPU-time clock
// read per command (a system call) would cost as much as the plain extend.
// Preemption on a shared CPU stretches both parts alike, so the proportion
// holds on average.
void extend_embedded(benchmark::State& state, bool protect) {
  EmbeddedTpm& e = embedded();
  std::unique_ptr<HmacSession> session;
  if (protect) {
    auto s = e.factory->start(attr::kContinueSession);
    if (!s.ok()) die("starting a session", s.error());
    session = std::move(*s);
  }
  Auth auth = protect ? Auth{session.get(), {}} : Auth::password();
  Bytes digest(32, 0x5a);
  e.timing->reset_counters();
  int64_t cpu_start = thread_cpu_ns();
  Clock::time_point start = Clock::now();
  for (auto _ : state) {
    Status st = pcr_extend(*e.tpm, alg::kSha256, kPcr, digest, auth);
    if (!st.ok()) {
      state.SkipWithError(st.error().message().c_str());
      break;
    }
  }
  double wall_ns = static_cast<double>(elapsed_ns(start, Clock::now()));
  double cpu_ns = static_cast<double>(thread_cpu_ns() - cpu_start);
  double tpm_share = static_cast<double>(e.timing->inside_ns()) / wall_ns;
  set_per_op_counter(state, "tpm_us", cpu_ns * tpm_share);
  set_per_op_counter(state, "host_us", cpu_ns * (1 - tpm_share));
}

void BM_ProtectedExtendEmbedded(benchmark::State& state) { extend_embedded(state, true); }
void BM_PlainExtendEmbedded(benchmark::State& state) { extend_embedded(state, false); }
TPMSEC_BENCHMARK(BM_ProtectedExtendEmbedded);
TPMSEC_BENCHMARK(BM_PlainExtendEmbedded);

// ---- Session start ----

// Manual time is this thread's CPU time (the machine is shared; libtpms runs
// on this thread, so CPU time is all of the work): the whole start, or
// (host_only) the start minus the CPU time inside TPMLIB_Process, read with a
// CPU clock around each of its three commands.
void session_start(benchmark::State& state, bool host_only) {
  EmbeddedTpm& e = embedded();
  e.timing->set_measure_cpu(true);
  double host_ns = 0, tpm_ns = 0;
  for (auto _ : state) {
    e.timing->reset_counters();
    int64_t start = thread_cpu_ns();
    auto s = e.factory->start(attr::kContinueSession);
    int64_t total = thread_cpu_ns() - start;
    int64_t inside = e.timing->inside_cpu_ns();
    if (!s.ok()) {
      state.SkipWithError(s.error().message().c_str());
      break;
    }
    host_ns += static_cast<double>(total - inside);
    tpm_ns += static_cast<double>(inside);
    state.SetIterationTime(static_cast<double>(host_only ? total - inside : total) / 1e9);
    s->reset();  // FlushContext of the session, untimed
  }
  e.timing->set_measure_cpu(false);
  set_per_op_counter(state, "host_us", host_ns);
  set_per_op_counter(state, "tpm_us", tpm_ns);
}

void BM_SessionStartEmbedded(benchmark::State& state) { session_start(state, false); }
void BM_SessionStartHost(benchmark::State& state) { session_start(state, true); }
// A fixed count: with manual time = host time only, --benchmark_min_time
// would ask for ~6x more wall time than it says.
TPMSEC_BENCHMARK(BM_SessionStartEmbedded)->UseManualTime()->Iterations(1000)->Unit(benchmark::kMicrosecond);
TPMSEC_BENCHMARK(BM_SessionStartHost)->UseManualTime()->Iterations(1000)->Unit(benchmark::kMicrosecond);

Status salt_and_session_key(const Public& key) {
  TPMSEC_ASSIGN_OR_RETURN(SaltedSecret salt, make_salt(key, crypto::system_random()));
  Bytes nonce_tpm(32, 0x33), nonce_caller(32, 0x44);
  TPMSEC_ASSIGN_OR_RETURN(SecretBytes session_key,
                          crypto::kdfa(alg::kSha256, salt.salt.view(), "ATH", nonce_tpm, nonce_caller, 256));
  benchmark::DoNotOptimize(session_key);
  return ok_status();
}

void BM_SessionStartCrypto(benchmark::State& state) {
  const Public& key = embedded().factory->null_key()->public_area();
  for (auto _ : state) {
    Status st = salt_and_session_key(key);
    if (!st.ok()) {
      state.SkipWithError(st.error().message().c_str());
      break;
    }
  }
}
TPMSEC_BENCHMARK(BM_SessionStartCrypto)->Unit(benchmark::kMicrosecond);

// ---- The primitives of one protected extend, each way it can be done ----
//
// What a protected PCR_Extend hashes (SHA-256): a cpHash of 46 bytes, an
// rpHash of 8, and two HMACs of 97 bytes (a digest, two nonces and the
// attributes) under one 32-byte key; a 32-byte nonce; for parameter
// encryption, AES-128-CFB of a short first parameter. Each benchmark below is
// one of these, done one way; they ran side by side for docs/performance.md
// ("Where the host time goes") to choose how the library does them.

constexpr size_t kCpHashInput = 4 + 4 + 4 + 2 + 32;  // commandCode, PCR name, one TPMT_HA
constexpr size_t kHmacMessage = 32 + 32 + 32 + 1;    // digest, nonceCaller, nonceTPM, attributes
const Bytes& primitive_input() {
  static const Bytes b(kHmacMessage, 0x42);
  return b;
}
const Bytes& primitive_key() {
  static const Bytes b(32, 0x17);
  return b;
}

EVP_MD* fetched_sha256() {
  static EVP_MD* md = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
  if (md == nullptr) die("EVP_MD_fetch(SHA2-256)");
  return md;
}

// SHA256_Init/Update/Final (deprecated in OpenSSL 3.0, not removed).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void BM_Sha256LowLevel(benchmark::State& state) {
  uint8_t out[32];
  for (auto _ : state) {
    SHA256_CTX c;
    SHA256_Init(&c);
    SHA256_Update(&c, primitive_input().data(), kCpHashInput);
    SHA256_Final(out, &c);
    benchmark::DoNotOptimize(out);
  }
}
TPMSEC_BENCHMARK(BM_Sha256LowLevel);

// HMAC from the key's inner and outer states, kept as SHA256_CTX values and
// copied per MAC (a struct copy).
// The key's inner and outer states (key ^ ipad, key ^ opad absorbed).
void keyed_states(SHA256_CTX& inner, SHA256_CTX& outer) {
  uint8_t pad[64];
  std::memset(pad, 0x36, 64);
  for (size_t i = 0; i < 32; ++i) pad[i] ^= primitive_key()[i];
  SHA256_Init(&inner);
  SHA256_Update(&inner, pad, 64);
  std::memset(pad, 0x5c, 64);
  for (size_t i = 0; i < 32; ++i) pad[i] ^= primitive_key()[i];
  SHA256_Init(&outer);
  SHA256_Update(&outer, pad, 64);
  OPENSSL_cleanse(pad, sizeof(pad));
}

void BM_HmacSha256LowLevelKeyed(benchmark::State& state) {
  SHA256_CTX inner, outer;
  keyed_states(inner, outer);
  uint8_t out[32];
  for (auto _ : state) {
    SHA256_CTX c = inner;
    SHA256_Update(&c, primitive_input().data(), kHmacMessage);
    SHA256_Final(out, &c);
    c = outer;
    SHA256_Update(&c, out, 32);
    SHA256_Final(out, &c);
    OPENSSL_cleanse(&c, sizeof(c));
    benchmark::DoNotOptimize(out);
  }
}
TPMSEC_BENCHMARK(BM_HmacSha256LowLevelKeyed);

// The same HMAC with the message in its six parts, one SHA256_Update each (two
// empty: no cipher sessions), as HmacSession passed it before PublicMessage.
void BM_HmacSha256LowLevelKeyedSixUpdates(benchmark::State& state) {
  SHA256_CTX inner, outer;
  keyed_states(inner, outer);
  const uint8_t* m = primitive_input().data();
  uint8_t out[32];
  for (auto _ : state) {
    SHA256_CTX c = inner;
    SHA256_Update(&c, m, 32);
    SHA256_Update(&c, m + 32, 32);
    SHA256_Update(&c, m + 64, 32);
    SHA256_Update(&c, m, 0);
    SHA256_Update(&c, m, 0);
    SHA256_Update(&c, m + 96, 1);
    SHA256_Final(out, &c);
    c = outer;
    SHA256_Update(&c, out, 32);
    SHA256_Final(out, &c);
    OPENSSL_cleanse(&c, sizeof(c));
    benchmark::DoNotOptimize(out);
  }
}
TPMSEC_BENCHMARK(BM_HmacSha256LowLevelKeyedSixUpdates);

// The same HMAC from padded blocks built by hand, SHA256_Transform per block
// (no SHA256_Update/Final bookkeeping).
void BM_HmacSha256Transform(benchmark::State& state) {
  SHA256_CTX inner, outer;
  keyed_states(inner, outer);
  uint8_t blocks[128] = {};
  std::memcpy(blocks, primitive_input().data(), kHmacMessage);
  blocks[kHmacMessage] = 0x80;
  store_be32(blocks + 124, (64 + kHmacMessage) * 8);
  uint8_t outer_block[64] = {};
  outer_block[32] = 0x80;
  store_be32(outer_block + 60, (64 + 32) * 8);
  uint8_t out[32];
  for (auto _ : state) {
    SHA256_CTX c = inner;
    SHA256_Transform(&c, blocks);
    SHA256_Transform(&c, blocks + 64);
    for (int i = 0; i < 8; ++i) store_be32(outer_block + 4 * i, c.h[i]);
    c = outer;
    SHA256_Transform(&c, outer_block);
    for (int i = 0; i < 8; ++i) store_be32(out + 4 * i, c.h[i]);
    OPENSSL_cleanse(&c, sizeof(c));
    benchmark::DoNotOptimize(out);
  }
}
TPMSEC_BENCHMARK(BM_HmacSha256Transform);
#pragma GCC diagnostic pop

// EVP on one reused context: EVP_DigestInit_ex2 + Update + Final per digest.
void BM_Sha256EvpReusedContext(benchmark::State& state) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  uint8_t out[32];
  unsigned int n = 0;
  for (auto _ : state) {
    if (EVP_DigestInit_ex2(ctx, fetched_sha256(), nullptr) != 1 ||
        EVP_DigestUpdate(ctx, primitive_input().data(), kCpHashInput) != 1 || EVP_DigestFinal_ex(ctx, out, &n) != 1) {
      die("EVP digest");
    }
    benchmark::DoNotOptimize(out);
  }
  EVP_MD_CTX_free(ctx);
}
TPMSEC_BENCHMARK(BM_Sha256EvpReusedContext);

// EVP: EVP_MD_CTX_copy_ex from a context initialised once, then Update + Final.
void BM_Sha256EvpCopyOfInitialised(benchmark::State& state) {
  EVP_MD_CTX* initialised = EVP_MD_CTX_new();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (EVP_DigestInit_ex2(initialised, fetched_sha256(), nullptr) != 1) die("EVP_DigestInit_ex2");
  uint8_t out[32];
  unsigned int n = 0;
  for (auto _ : state) {
    if (EVP_MD_CTX_copy_ex(ctx, initialised) != 1 ||
        EVP_DigestUpdate(ctx, primitive_input().data(), kCpHashInput) != 1 || EVP_DigestFinal_ex(ctx, out, &n) != 1) {
      die("EVP digest");
    }
    benchmark::DoNotOptimize(out);
  }
  EVP_MD_CTX_free(ctx);
  EVP_MD_CTX_free(initialised);
}
TPMSEC_BENCHMARK(BM_Sha256EvpCopyOfInitialised);

// HMAC through EVP: inner and outer keyed contexts prepared once, each MAC
// two EVP_MD_CTX_copy_ex (the keyed HMAC state copied from pre-keyed contexts).
void BM_HmacSha256EvpCopyKeyed(benchmark::State& state) {
  EVP_MD_CTX* inner = EVP_MD_CTX_new();
  EVP_MD_CTX* outer = EVP_MD_CTX_new();
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  uint8_t ipad[64], opad[64];
  std::memset(ipad, 0x36, 64);
  std::memset(opad, 0x5c, 64);
  for (size_t i = 0; i < 32; ++i) {
    ipad[i] ^= primitive_key()[i];
    opad[i] ^= primitive_key()[i];
  }
  if (EVP_DigestInit_ex2(inner, fetched_sha256(), nullptr) != 1 || EVP_DigestUpdate(inner, ipad, 64) != 1 ||
      EVP_DigestInit_ex2(outer, fetched_sha256(), nullptr) != 1 || EVP_DigestUpdate(outer, opad, 64) != 1) {
    die("keying the EVP contexts");
  }
  uint8_t out[32];
  unsigned int n = 0;
  for (auto _ : state) {
    if (EVP_MD_CTX_copy_ex(ctx, inner) != 1 || EVP_DigestUpdate(ctx, primitive_input().data(), kHmacMessage) != 1 ||
        EVP_DigestFinal_ex(ctx, out, &n) != 1 || EVP_MD_CTX_copy_ex(ctx, outer) != 1 ||
        EVP_DigestUpdate(ctx, out, 32) != 1 || EVP_DigestFinal_ex(ctx, out, &n) != 1) {
      die("EVP HMAC");
    }
    benchmark::DoNotOptimize(out);
  }
  for (EVP_MD_CTX* c : {inner, outer, ctx}) EVP_MD_CTX_free(c);
}
TPMSEC_BENCHMARK(BM_HmacSha256EvpCopyKeyed);

// HMAC through EVP_MAC: keyed once, EVP_MAC_init without a key per MAC (the
// provider copies its keyed state back).
void BM_HmacSha256EvpMacReinit(benchmark::State& state) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* ctx = mac ? EVP_MAC_CTX_new(mac) : nullptr;
  char digest[] = "SHA2-256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (!ctx || EVP_MAC_init(ctx, primitive_key().data(), primitive_key().size(), params) != 1) die("EVP_MAC_init");
  uint8_t out[32];
  size_t n = 0;
  for (auto _ : state) {
    if (EVP_MAC_init(ctx, nullptr, 0, nullptr) != 1 ||
        EVP_MAC_update(ctx, primitive_input().data(), kHmacMessage) != 1 || EVP_MAC_final(ctx, out, &n, 32) != 1) {
      die("EVP_MAC");
    }
    benchmark::DoNotOptimize(out);
  }
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
}
TPMSEC_BENCHMARK(BM_HmacSha256EvpMacReinit);

// The library's one-shot calls, as a command made them: the key set up per HMAC.
void BM_Sha256Library(benchmark::State& state) {
  for (auto _ : state) {
    auto d = crypto::hash(alg::kSha256, {ByteView(primitive_input()).first(kCpHashInput)});
    benchmark::DoNotOptimize(d);
  }
}
TPMSEC_BENCHMARK(BM_Sha256Library);

void BM_HmacSha256LibraryOneShot(benchmark::State& state) {
  for (auto _ : state) {
    auto m = crypto::hmac(alg::kSha256, primitive_key(), {primitive_input()});
    benchmark::DoNotOptimize(m);
  }
}
TPMSEC_BENCHMARK(BM_HmacSha256LibraryOneShot);

// 32 random bytes (a nonceCaller), each way.
void BM_Nonce32RandBytes(benchmark::State& state) {
  uint8_t out[32];
  for (auto _ : state) {
    if (RAND_bytes(out, 32) != 1) die("RAND_bytes");
    benchmark::DoNotOptimize(out);
  }
}
TPMSEC_BENCHMARK(BM_Nonce32RandBytes);

// RAND_bytes per call by request size: what a block of nonce_random() costs.
void BM_RandBytesBlock(benchmark::State& state) {
  std::vector<uint8_t> out(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) die("RAND_bytes");
    benchmark::DoNotOptimize(out.data());
  }
}
TPMSEC_BENCHMARK(BM_RandBytesBlock)->Arg(32)->Arg(1024)->Arg(4096)->Arg(16384);

void BM_Nonce32RandPrivBytes(benchmark::State& state) {
  uint8_t out[32];
  for (auto _ : state) {
    if (RAND_priv_bytes(out, 32) != 1) die("RAND_priv_bytes");
    benchmark::DoNotOptimize(out);
  }
}
TPMSEC_BENCHMARK(BM_Nonce32RandPrivBytes);

// A CTR-DRBG of this thread's own, OpenSSL's EVP_RAND, seeded by the primary DRBG.
void BM_Nonce32EvpRandOwnDrbg(benchmark::State& state) {
  EVP_RAND* rand = EVP_RAND_fetch(nullptr, "CTR-DRBG", nullptr);
  EVP_RAND_CTX* drbg = rand ? EVP_RAND_CTX_new(rand, RAND_get0_primary(nullptr)) : nullptr;
  char cipher[] = "AES-256-CTR";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_DRBG_PARAM_CIPHER, cipher, 0),
                         OSSL_PARAM_construct_end()};
  if (!drbg || EVP_RAND_instantiate(drbg, 0, 0, nullptr, 0, params) != 1) die("EVP_RAND_instantiate");
  uint8_t out[32];
  for (auto _ : state) {
    if (EVP_RAND_generate(drbg, out, 32, 0, 0, nullptr, 0) != 1) die("EVP_RAND_generate");
    benchmark::DoNotOptimize(out);
  }
  EVP_RAND_CTX_free(drbg);
  EVP_RAND_free(rand);
}
TPMSEC_BENCHMARK(BM_Nonce32EvpRandOwnDrbg);

void BM_Nonce32NonceRandom(benchmark::State& state) {
  uint8_t out[32];
  for (auto _ : state) {
    if (!crypto::nonce_random().fill(MutableByteView(out, 32)).ok()) die("nonce_random");
    benchmark::DoNotOptimize(out);
  }
}
TPMSEC_BENCHMARK(BM_Nonce32NonceRandom);

// AES-128-CFB of 32 bytes under a new key and IV: a fresh EVP_CIPHER_CTX per
// call (the library) vs one context re-initialised with the new key and IV.
void BM_AesCfb32FreshContext(benchmark::State& state) {
  uint8_t data[32] = {};
  for (auto _ : state) {
    Status st = crypto::aes_cfb_encrypt(ByteView(primitive_key()).first(16), ByteView(primitive_key()).last(16),
                                        MutableByteView(data, 32));
    if (!st.ok()) die("aes_cfb_encrypt", st.error());
    benchmark::DoNotOptimize(data);
  }
}
TPMSEC_BENCHMARK(BM_AesCfb32FreshContext);

void BM_AesCfb32ReusedContext(benchmark::State& state) {
  EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-128-CFB", nullptr);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (!cipher || !ctx || EVP_CipherInit_ex2(ctx, cipher, nullptr, nullptr, 1, nullptr) != 1) die("AES-CFB set-up");
  uint8_t data[32] = {};
  int n = 0;
  for (auto _ : state) {
    if (EVP_CipherInit_ex2(ctx, nullptr, primitive_key().data(), primitive_key().data() + 16, 1, nullptr) != 1 ||
        EVP_CipherUpdate(ctx, data, &n, data, 32) != 1) {
      die("AES-CFB");
    }
    benchmark::DoNotOptimize(data);
  }
  EVP_CIPHER_CTX_free(ctx);
  EVP_CIPHER_free(cipher);
}
TPMSEC_BENCHMARK(BM_AesCfb32ReusedContext);

// The low-level API the issue asked about: AES_set_encrypt_key +
// AES_cfb128_encrypt, the schedule wiped after use. In OpenSSL 3.0 these are
// the table-driven AES (no AES-NI: that is reached through EVP only), whose
// lookups depend on the key: timing shown, not an option for tpmsec.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void BM_AesCfb32LowLevel(benchmark::State& state) {
  uint8_t data[32] = {};
  for (auto _ : state) {
    AES_KEY key;
    uint8_t iv[16];
    std::memcpy(iv, primitive_key().data() + 16, 16);
    int num = 0;
    if (AES_set_encrypt_key(primitive_key().data(), 128, &key) != 0) die("AES_set_encrypt_key");
    AES_cfb128_encrypt(data, data, 32, &key, iv, &num, AES_ENCRYPT);
    OPENSSL_cleanse(&key, sizeof(key));
    benchmark::DoNotOptimize(data);
  }
}
TPMSEC_BENCHMARK(BM_AesCfb32LowLevel);
#pragma GCC diagnostic pop

// ---- Instruction counts under callgrind ----

// Each measured region is one callgrind dump (collection is off outside them).
template <class Body>
void counted_region(const char* name, bool exclude_tpm, Body&& body) {
  g_exclude_tpm_from_callgrind = exclude_tpm;
  CALLGRIND_ZERO_STATS;
  CALLGRIND_TOGGLE_COLLECT;
  body();
  CALLGRIND_TOGGLE_COLLECT;
  g_exclude_tpm_from_callgrind = false;
  CALLGRIND_DUMP_STATS_AT(name);
}

int run_for_callgrind(int n) {
#ifndef TPMSEC_HAVE_CALLGRIND
  (void)n;
  die("built without valgrind/callgrind.h");
#else
  if (!RUNNING_ON_VALGRIND) std::fprintf(stderr, "session_bench: not under valgrind; counting nothing\n");
  auto extends = [](HostHarness& h, int count) {
    for (int i = 0; i < count; ++i) {
      Status st = h.extend();
      if (!st.ok()) die("extend", st.error());
    }
  };
  EmbeddedTpm& e = embedded();
  auto embedded_extends = [&e](const Auth& auth, int count) {
    for (int i = 0; i < count; ++i) {
      Status st = pcr_extend(*e.tpm, alg::kSha256, kPcr, Bytes(32, 0x5a), auth);
      if (!st.ok()) die("embedded extend", st.error());
    }
  };
  const Public& key = e.factory->null_key()->public_area();
  auto salts = [&key](int count) {
    for (int i = 0; i < count; ++i) {
      if (!salt_and_session_key(key).ok()) die("salt");
    }
  };
  auto starts = [&e](int count) {
    for (int i = 0; i < count; ++i) {
      auto s = e.factory->start(attr::kContinueSession);
      if (!s.ok()) die("session start", s.error());
      g_exclude_tpm_from_callgrind = false;  // the flush is not counted at all
      CALLGRIND_TOGGLE_COLLECT;
      s->reset();
      CALLGRIND_TOGGLE_COLLECT;
      g_exclude_tpm_from_callgrind = true;
    }
  };

  HostHarness protected_h(ScriptedTpm::Mode::kHmacSession);
  HostHarness plain_h(ScriptedTpm::Mode::kPassword);
  auto session = e.factory->start(attr::kContinueSession);
  if (!session.ok()) die("session start", session.error());
  Auth protected_auth{session->get(), {}};
  // Warm up: lazy OpenSSL and libtpms initialisation is not per-command cost.
  extends(protected_h, 200);
  extends(plain_h, 200);
  embedded_extends(protected_auth, 200);
  embedded_extends(Auth::password(), 200);
  salts(5);
  starts(5);
  Bytes command;
  {
    protected_h.scripted.set_record_commands(true);
    extends(protected_h, 1);
    protected_h.scripted.set_record_commands(false);
    command = protected_h.scripted.last_command();
  }
  const int m = n / 10 > 0 ? n / 10 : 1;

  counted_region("protected-extend-host", true, [&] { extends(protected_h, n); });
  counted_region("plain-extend-host", true, [&] { extends(plain_h, n); });
  counted_region("scripted-tpm-response", false, [&] {
    for (int i = 0; i < n; ++i) {
      auto r = protected_h.scripted.respond(command);
      benchmark::DoNotOptimize(r);
    }
  });
  counted_region("protected-extend-embedded-host", true, [&] { embedded_extends(protected_auth, n); });
  counted_region("protected-extend-embedded-total", false, [&] { embedded_extends(protected_auth, n); });
  counted_region("plain-extend-embedded-total", false, [&] { embedded_extends(Auth::password(), n); });
  counted_region("salt-and-session-key", false, [&] { salts(m); });
  counted_region("session-start-host", true, [&] { starts(m); });
  std::printf(
      "dumps (name x count): 1 protected-extend-host x%d, 2 plain-extend-host x%d, "
      "3 scripted-tpm-response x%d, 4 protected-extend-embedded-host x%d, "
      "5 protected-extend-embedded-total x%d, 6 plain-extend-embedded-total x%d, "
      "7 salt-and-session-key x%d, 8 session-start-host x%d\n",
      n, n, n, n, n, n, m, m);
  return 0;
#endif
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  return CPU_COUNT(&set);
}

}  // namespace
}  // namespace tpmsec::bench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.starts_with("--callgrind=")) {
      return tpmsec::bench::run_for_callgrind(std::atoi(argv[i] + std::strlen("--callgrind=")));
    }
  }
  int cpus = tpmsec::bench::allowed_cpus();
  benchmark::AddCustomContext("cpus_allowed", std::to_string(cpus));
  if (cpus != 1) {
    std::fprintf(stderr, "session_bench: running on %d CPUs; pin it (taskset -c 1) for comparable figures\n", cpus);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
