// A transport decorator that records every command: what it was, when it
// started and how long the TPM took, on a Clock (virtual when emulated).
// Benchmarks, breakdowns and trace export are built on these records.
#ifndef TPMSEC_TRANSPORT_TRACING_H_
#define TPMSEC_TRANSPORT_TRACING_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tpmsec/transport.h"
#include "tpmsec/transport/clock.h"

namespace tpmsec {

// What a command looked like on the wire (parsed from its header and
// authorization area; malformed commands are recorded with what was readable).
struct CommandShape {
  uint32_t command_code = 0;
  uint32_t response_code = 0;
  size_t command_bytes = 0;
  size_t response_bytes = 0;
  uint8_t session_count = 0;        // authorization sessions
  bool hmac_session = false;        // any non-password session
  uint8_t session_attributes = 0;   // OR of all sessions' attributes
  uint32_t first_handle = 0;        // first handle in the handle area, if any
  bool salted = false;              // StartAuthSession with a tpmKey
  size_t encrypted_salt_bytes = 0;  // StartAuthSession: 68 for ECC P-256, 256 for RSA-2048
  uint32_t context_handle = 0;      // ContextLoad: savedHandle of the context; ContextSave: the handle
  uint16_t object_type = 0;         // CreatePrimary: the inPublic template's type (TPM_ALG_ECC, TPM_ALG_RSA)

  // The one rule for the salt's kind: an RSA-2048 OAEP ciphertext is 256
  // bytes, a P-256 point 68; anything from 128 bytes up is taken as RSA.
  bool rsa_salt() const { return encrypted_salt_bytes >= 128; }
  // The one rule for a context's kind: HMAC and policy sessions (handle
  // types 0x02, 0x03) are sessions, everything else an object.
  bool session_context() const {
    const uint8_t type = static_cast<uint8_t>(context_handle >> 24);
    return type == 0x02 || type == 0x03;
  }
};

// Parses the shape of `command` (and the response code of `response`).
CommandShape shape_of(ByteView command, ByteView response);

// The spec name of a command code ("PCR_Extend"), or hex.
std::string command_name(uint32_t command_code);

struct TraceRecord {
  CommandShape shape;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
};

class TracingTransport final : public TransportDecorator {
 public:
  using Sink = std::function<void(const TraceRecord&)>;
  TracingTransport(Transport& inner, const Clock& clock, Sink sink)
      : TransportDecorator(inner, Traffic::kObserves), clock_(clock), sink_(std::move(sink)) {}

  Result<Bytes> transmit(ByteView command) override;
  Status reset_tpm() override { return inner().reset_tpm(); }
  Status suspend_resume() override { return inner().suspend_resume(); }

 private:
  const Clock& clock_;
  Sink sink_;
};

}  // namespace tpmsec

#endif  // TPMSEC_TRANSPORT_TRACING_H_
