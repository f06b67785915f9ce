// TimingTransport: a Transport decorator that accumulates the time spent
// inside the wrapped transport's transmit(). Around the embedded transport
// that is the time inside TPMLIB_Process (plus the embedded transport's own
// copy of the command and of the response), i.e. "TPM time"; whatever a
// caller measures around a whole operation minus this is host time.
//
// Wall time is always kept: steady_clock reads the TSC through the vDSO
// (~20 ns), cheap enough around microsecond commands. This thread's CPU time
// is kept only when asked (set_measure_cpu): CLOCK_THREAD_CPUTIME_ID is a
// system call (~0.6 µs on these VMs), fine around commands that take
// hundreds of microseconds, too coarse around a 2 µs PCR_Extend. On a shared
// machine wall time includes time the thread spent preempted; CPU time does not.
#ifndef TPMSEC_BENCH_TIMING_TRANSPORT_H_
#define TPMSEC_BENCH_TIMING_TRANSPORT_H_

#include <time.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "tpmsec/transport.h"

namespace tpmsec::bench {

using Clock = std::chrono::steady_clock;

inline int64_t elapsed_ns(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count();
}

// CPU time consumed by the calling thread.
inline int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

class TimingTransport final : public Transport {
 public:
  explicit TimingTransport(Transport& inner) : inner_(&inner) {}

  Result<Bytes> transmit(ByteView command) override {
    int64_t cpu_start = measure_cpu_ ? thread_cpu_ns() : 0;
    Clock::time_point start = Clock::now();
    Result<Bytes> response = inner_->transmit(command);
    inside_ns_ += elapsed_ns(start, Clock::now());
    if (measure_cpu_) inside_cpu_ns_ += thread_cpu_ns() - cpu_start;
    ++commands_;
    return response;
  }
  Status reset_tpm() override { return inner_->reset_tpm(); }
  std::string describe() const override { return inner_->describe(); }

  void set_measure_cpu(bool on) { measure_cpu_ = on; }

  // Wall and (when measured) CPU time inside the inner transmit, and commands
  // sent, since the last reset_counters().
  int64_t inside_ns() const { return inside_ns_; }
  int64_t inside_cpu_ns() const { return inside_cpu_ns_; }
  uint64_t commands() const { return commands_; }
  void reset_counters() {
    inside_ns_ = 0;
    inside_cpu_ns_ = 0;
    commands_ = 0;
  }

 private:
  Transport* inner_;
  bool measure_cpu_ = false;
  int64_t inside_ns_ = 0;
  int64_t inside_cpu_ns_ = 0;
  uint64_t commands_ = 0;
};

}  // namespace tpmsec::bench

#endif  // TPMSEC_BENCH_TIMING_TRANSPORT_H_
