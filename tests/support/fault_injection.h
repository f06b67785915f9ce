// A Transport decorator that tampers with the traffic to the TPM it wraps, as
// a bus interposer or a flaky bus would: per command it may mutate the
// command before the TPM sees it, mutate the response, replace the response
// with a forged one (after the TPM executed the command, or without letting
// the TPM see it at all), or fail the transmission.
//
// What happens to each command is decided by a hook the test (or tool)
// programs; with no hook the decorator is transparent. The decorator does
// not own the transport it wraps, and is not thread-safe (nor are the
// transports it wraps).
//
// A test hook, not part of the library: it lives in the test support
// (tpmsec_test_support) and is not installed.
#ifndef TPMSEC_TESTS_SUPPORT_FAULT_INJECTION_H_
#define TPMSEC_TESTS_SUPPORT_FAULT_INJECTION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "testing/transport_doubles.h"
#include "tpmsec/transport.h"

namespace tpmsec {

// XOR `mask` into the byte at `position`. A position past the end of the
// buffer is skipped (and not counted as applied: see FaultCounters).
struct ByteFlip {
  size_t position = 0;
  uint8_t mask = 0;
};

// What to do with one command. A default-constructed Fault passes the command
// through untouched. The steps run in this order:
//   1. command_flips are applied to the command;
//   2. if execute, the (mutated) command is sent to the wrapped TPM;
//      a failure of the wrapped transport is returned as it is;
//   3. if fail_transmission, a kRuntime error is returned (the TPM may have
//      executed the command: see execute);
//   4. the response is the TPM's, or forged_response when set;
//   5. response_flips, then truncate_response_to, then append_to_response
//      are applied to it.
// execute == false needs forged_response or fail_transmission (there is no
// response otherwise); transmit() refuses such a Fault with kUsage.
struct Fault {
  std::vector<ByteFlip> command_flips;
  bool execute = true;
  bool fail_transmission = false;
  std::optional<Bytes> forged_response;
  std::vector<ByteFlip> response_flips;
  std::optional<size_t> truncate_response_to;
  Bytes append_to_response;

  // True when this Fault changes nothing.
  bool is_pass() const;

  static Fault pass() { return {}; }
  static Fault flip_command(size_t position, uint8_t mask);
  static Fault flip_response(size_t position, uint8_t mask);
  static Fault truncate_response(size_t size);
  static Fault append_response(Bytes extra);
  // Answers with a bare error response carrying `response_code`; `executed`
  // says whether the TPM runs the command first (and its answer is lost).
  static Fault forge_error(uint32_t response_code, bool executed);
  // The transmission fails (kRuntime) before or after the TPM executed it.
  static Fault fail(bool executed);
};

// A response as a TPM sends it for an error: tag TPM_ST_NO_SESSIONS, size 10,
// then `response_code`.
Bytes error_response(uint32_t response_code);

// Decides the Fault for each command. `command_index` counts every command
// transmitted through the decorator, from 0.
using FaultHook = std::function<Fault(size_t command_index, uint32_t command_code, ByteView command)>;

struct FaultCounters {
  size_t commands = 0;        // transmit() calls
  size_t executed = 0;        // commands the wrapped TPM received
  size_t faulted = 0;         // commands whose Fault was not a pass
  size_t command_flips = 0;   // command flips applied (positions in range)
  size_t response_flips = 0;  // response flips applied (positions in range)
  size_t truncated = 0;       // responses truncated
  size_t appended = 0;        // responses extended
  size_t forged = 0;          // responses replaced by forged_response
  size_t failed = 0;          // transmissions failed by fail_transmission
};

class FaultInjectingTransport final : public TransportDecorator {
 public:
  explicit FaultInjectingTransport(Transport& inner, FaultHook hook = nullptr)
      : TransportDecorator(inner, Traffic::kAlters), inner_(&inner), hook_(std::move(hook)) {}

  Result<Bytes> transmit(ByteView command) override;
  // Forwarded to the wrapped transport; not subject to faults.
  Status reset_tpm() override { return inner_->reset_tpm(); }
  Status suspend_resume() override { return inner_->suspend_resume(); }
  // The wrapped transport's description with "+faults" appended.
  std::string describe() const override { return inner_->describe() + "+faults"; }
  // Not in_process(): it alters traffic (Traffic::kAlters). Who shares the
  // TPM is unchanged.

  // Replaces the hook (nullptr: pass everything through).
  void set_hook(FaultHook hook) { hook_ = std::move(hook); }

  const FaultCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

  // The response the wrapped TPM returned for the last command, before any
  // response fault; nullopt when the TPM did not execute it or its transport
  // failed. This is the ground truth a test compares the client's view with.
  const std::optional<Bytes>& last_tpm_response() const { return last_tpm_response_; }
  // Its response code; nullopt also when it was shorter than a header.
  std::optional<uint32_t> last_tpm_response_code() const;

  Transport& inner() { return *inner_; }

 private:
  Transport* inner_;
  FaultHook hook_;
  FaultCounters counters_;
  std::optional<Bytes> last_tpm_response_;
};

}  // namespace tpmsec

#endif  // TPMSEC_TESTS_SUPPORT_FAULT_INJECTION_H_
