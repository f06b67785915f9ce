// Host CPU of the TCTI's library part (tpmsec/wrap.h) per wrapped command:
// CommandWrapper::wrap() of a caller's frame plus unwrap() of the TPM's
// response, as libtss2-tcti-tpmsec.so.0 runs them for every command of
// tpm2-tools. The TPM is the embedded libtpms, answering every frame for
// real; only the wrapper's work is timed (this thread's CPU time around
// wrap() and around unwrap(), as manual time), not the TPM's.
//
//   build/bench/wrap_bench --benchmark_min_time=0.5 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
//
// * BM_WrapPcrExtend — tpm2_pcrextend's PCR_Extend(16, sha256) with an empty
//   password: the password's slot becomes the session's HMAC authorization
//   (nonceCaller, cpHash, HMAC; rpHash, response HMAC check, nonce roll).
// * BM_WrapGetRandom — tpm2_getrandom's GetRandom(32), no session: the
//   session is appended with encrypt (AES-128-CFB of the 32 response bytes,
//   KDFa for its key) and the TPM_ST_NO_SESSIONS response restored.
#include <benchmark/benchmark.h>
#include <time.h>

#include "tpmsec/session_factory.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"
#include "tpmsec/wrap.h"

namespace tpmsec {
namespace {

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A command frame: header, then what `body` writes.
template <class Body>
Bytes frame(uint16_t tag, uint32_t code, Body body) {
  Writer w;
  w.u16(tag);
  auto size = w.begin_total_size32("commandSize");
  w.u32(code);
  body(w);
  w.end_size(size);
  return *w.finish();
}

// PCR_Extend(16, sha256) with an empty password, as tpm2_pcrextend sends it.
Bytes pcr_extend_frame() {
  return frame(st::kSessions, 0x182, [](Writer& w) {
    w.u32(16);
    auto auth = w.begin_size32("authorizationSize");
    w.u32(rh::kPasswordSession);
    w.u16(0);
    w.u8(attr::kContinueSession);
    w.u16(0);
    w.end_size(auth);
    w.u32(1);
    w.u16(alg::kSha256);
    w.bytes(Bytes(32, 0x5a));
  });
}

// GetRandom(32) without a session, as tpm2_getrandom sends it.
Bytes get_random_frame() {
  return frame(st::kNoSessions, 0x17B, [](Writer& w) { w.u16(32); });
}

void wrapped(benchmark::State& state, const Bytes& command) {
  auto transport = open_embedded();
  if (!transport.ok()) return state.SkipWithError(transport.error().message().c_str());
  Tpm tpm(**transport);
  auto factory = SessionFactory::create(tpm, {});
  if (!factory.ok()) return state.SkipWithError(factory.error().message().c_str());
  {
    CommandWrapper wrapper(**factory);
    // Once untimed: the session starts and its key is confirmed.
    auto first = wrapper.exchange(**transport, command);
    if (!first.ok()) return state.SkipWithError(first.error().message().c_str());
    for (auto _ : state) {
      double t0 = thread_cpu_seconds();
      auto frame = wrapper.wrap(command);
      double t1 = thread_cpu_seconds();
      if (!frame.ok()) return state.SkipWithError(frame.error().message().c_str());
      auto response = (*transport)->transmit(*frame);
      if (!response.ok()) return state.SkipWithError(response.error().message().c_str());
      double t2 = thread_cpu_seconds();
      auto out = wrapper.unwrap(*response);
      double t3 = thread_cpu_seconds();
      if (!out.ok()) return state.SkipWithError(out.error().message().c_str());
      state.SetIterationTime((t1 - t0) + (t3 - t2));
    }
    if (wrapper.sessions_started() != 1) state.SkipWithError("the session was restarted while timing");
  }
}

void BM_WrapPcrExtend(benchmark::State& state) { wrapped(state, pcr_extend_frame()); }
BENCHMARK(BM_WrapPcrExtend)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_WrapGetRandom(benchmark::State& state) { wrapped(state, get_random_frame()); }
BENCHMARK(BM_WrapGetRandom)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tpmsec

BENCHMARK_MAIN();
