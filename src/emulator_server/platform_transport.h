// The chip's platform around the embedded libtpms, as the server's clients
// drive it: power (_TPM_Init, power off) and the locality commands run at.
// Every command gets a TPM answer: while powered off, or when libtpms fails,
// TPM_RC_FAILURE, so that the latency model above bills it as any answer.
#ifndef TPMSEC_SRC_EMULATOR_SERVER_PLATFORM_TRANSPORT_H_
#define TPMSEC_SRC_EMULATOR_SERVER_PLATFORM_TRANSPORT_H_

#include <functional>
#include <string>

#include "tpmsec/transport.h"

namespace tpmsec::emulation {

class PlatformTransport final : public TransportDecorator {
 public:
  using Log = std::function<void(const std::string&)>;
  PlatformTransport(Transport& embedded, Log log)
      : TransportDecorator(embedded, Traffic::kObserves), embedded_(embedded), log_(std::move(log)) {}

  Result<Bytes> transmit(ByteView command) override;
  Status reset_tpm() override { return embedded_.reset_tpm(); }
  Status suspend_resume() override { return embedded_.suspend_resume(); }

  // _TPM_Init (power on or reset), the volatile state dropped when asked.
  Status tpm_init(bool delete_volatile);
  void power_off();
  bool powered() const { return powered_; }
  // The locality the next commands run at (0..4; checked by the caller).
  void set_locality(uint8_t locality) { locality_ = locality; }
  uint8_t locality() const { return locality_; }

 private:
  Transport& embedded_;
  Log log_;
  bool powered_ = true;
  uint8_t locality_ = 0;
};

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATOR_SERVER_PLATFORM_TRANSPORT_H_
