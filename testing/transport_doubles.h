// The transport doubles shared by the tests, the fuzzers and the benchmarks
// (library tpmsec_test_doubles, never installed). Two kinds, and no mock TPM:
//   - ScriptedTransport: no TPM at all, for code that only parses or frames
//     (canned responses, a responder callback, or a fixed answer);
//   - decorators around a real transport (the embedded TPM, swtpm):
//     RecordingTransport only observes (it forwards in_process(), as the
//     tracing decorator does); InterposingTransport hands each command to a
//     callback that may forward, rewrite, forge or time it, as an interposer
//     on the bus would (it is never in_process()).
// Decorators do not own what they wrap, forward reset_tpm(), suspend_resume(),
// private_handles() and outlives_process(), and are not thread-safe.
#ifndef TPMSEC_TESTING_TRANSPORT_DOUBLES_H_
#define TPMSEC_TESTING_TRANSPORT_DOUBLES_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "tpmsec/transport.h"

namespace tpmsec::testing {

// Answers without a TPM: each command gets the next queued response; when
// none is queued, the responder's answer; without a responder, a kRuntime
// error ("NAME: no more responses"), so a retried command never loops.
class ScriptedTransport final : public Transport {
 public:
  using Responder = std::function<Result<Bytes>(ByteView command)>;

  explicit ScriptedTransport(std::string name = "scripted") : name_(std::move(name)) {}

  void push(Bytes response) { queue_.push_back(std::move(response)); }
  void respond_with(Responder responder) { responder_ = std::move(responder); }
  // Every command (after the queue) is answered with `response`.
  void always(Bytes response);
  // Keep the commands received (default on; off for hot loops).
  void set_recording(bool on) { recording_ = on; }

  Result<Bytes> transmit(ByteView command) override;
  Status reset_tpm() override {
    ++resets_;
    return ok_status();
  }
  std::string describe() const override { return name_; }

  // Every command received, in order (while recording).
  const std::vector<Bytes>& sent() const { return sent_; }
  size_t resets() const { return resets_; }

 private:
  std::string name_;
  std::deque<Bytes> queue_;
  Responder responder_;
  bool recording_ = true;
  std::vector<Bytes> sent_;
  size_t resets_ = 0;
};

// Passes every command to the transport it wraps and shows each exchange to
// an observer; keeps the command codes. It alters nothing, so an in-process
// TPM stays in process.
class RecordingTransport final : public TransportDecorator {
 public:
  using Observer = std::function<void(ByteView command, const Result<Bytes>& response)>;

  explicit RecordingTransport(Transport& inner, Observer observe = nullptr)
      : TransportDecorator(inner, Traffic::kObserves), inner_(&inner), observe_(std::move(observe)) {}

  Result<Bytes> transmit(ByteView command) override;
  Status reset_tpm() override { return inner_->reset_tpm(); }
  Status suspend_resume() override { return inner_->suspend_resume(); }

  // The command code of every command transmitted, in order.
  const std::vector<uint32_t>& codes() const { return codes_; }
  void clear() { codes_.clear(); }

 private:
  Transport* inner_;
  Observer observe_;
  std::vector<uint32_t> codes_;
};

// Hands each command to a callback with the transport it wraps: the callback
// decides what the client gets (forward, rewrite the response, forge one,
// time or gate the TPM's work). Not in_process(): it can alter traffic.
class InterposingTransport final : public TransportDecorator {
 public:
  using Interpose = std::function<Result<Bytes>(ByteView command, Transport& inner)>;

  // `suffix` is appended to the inner transport's describe() ("+rewrite").
  InterposingTransport(Transport& inner, Interpose interpose, std::string suffix = "")
      : TransportDecorator(inner, Traffic::kAlters),
        inner_(&inner),
        interpose_(std::move(interpose)),
        suffix_(std::move(suffix)) {}

  Result<Bytes> transmit(ByteView command) override { return interpose_(command, *inner_); }
  Status reset_tpm() override { return inner_->reset_tpm(); }
  Status suspend_resume() override { return inner_->suspend_resume(); }
  std::string describe() const override { return inner_->describe() + suffix_; }

  Transport& inner() { return *inner_; }

 private:
  Transport* inner_;
  Interpose interpose_;
  std::string suffix_;
};

// The command code of a marshalled command (bytes 6-9), or 0 when it is too short.
uint32_t command_code_of(ByteView command);
// True for a response with a header and response code TPM_RC_SUCCESS.
bool succeeded(const Result<Bytes>& response);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTING_TRANSPORT_DOUBLES_H_
