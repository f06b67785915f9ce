// Time for measurements. Everything tpmsec measures reads a Clock, so that
// an emulated TPM (latency_transport.h) can advance a virtual clock by the
// latency its profile predicts while host work is still timed for real.
#ifndef TPMSEC_TRANSPORT_CLOCK_H_
#define TPMSEC_TRANSPORT_CLOCK_H_

#include <chrono>
#include <cstdint>

namespace tpmsec {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds since an arbitrary epoch; monotonic.
  virtual int64_t now_ns() const = 0;
  virtual bool is_virtual() const { return false; }
};

// The host's steady clock.
class SteadyClock final : public Clock {
 public:
  int64_t now_ns() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// Real host time plus an offset that an emulated TPM adjusts: each emulated
// command replaces the real time spent in the TPM with its modelled latency
// (offset += modelled - real), so host work stays real and TPM time follows
// the model, and an emulated hour passes in seconds.
class VirtualClock final : public Clock {
 public:
  int64_t now_ns() const override { return real_.now_ns() + offset_ns_; }
  bool is_virtual() const override { return true; }
  void adjust(int64_t delta_ns) { offset_ns_ += delta_ns; }

 private:
  SteadyClock real_;
  int64_t offset_ns_ = 0;
};

// The process's steady clock instance.
Clock& steady_clock();

}  // namespace tpmsec

#endif  // TPMSEC_TRANSPORT_CLOCK_H_
