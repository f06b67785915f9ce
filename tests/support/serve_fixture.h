// The fixture of the serve tests that put the interposer (interposer.h)
// between `tpmsec serve` and a real swtpm (serve_attack_test,
// serve_interposer_test): the suite's swtpm and its null key's name (the
// anchor serve is given, --null-name), the interposer recording every byte
// that crosses it under the test's rule, serve in a directory of the test's
// (serve_process.h), and the check that the TPM, read straight, holds
// nothing a server left. A suite shares the swtpm; each test makes its own
// interposer and server, so nothing one server cached or one rule recorded
// reaches the next test.
#ifndef TPMSEC_TESTS_SUPPORT_SERVE_FIXTURE_H_
#define TPMSEC_TESTS_SUPPORT_SERVE_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/interposer.h"
#include "support/serve_process.h"
#include "support/swtpm_process.h"
#include "tpmsec/bytes.h"
#include "tpmsec/result.h"

namespace tpmsec::testing {

// A swtpm, started, and the name of its null hierarchy's ECC salt key as
// tpmsec's own connection reads it (after Startup).
struct SuiteTpm {
  SwtpmProcess swtpm;
  std::string null_name;
  // False with *error when swtpm did not start or the key was not read.
  bool start(std::string* error);
};

// The interposer on swtpm's data port whose commands go to the test's rule
// (set_rule; none: pass) and are recorded, each with its response, and all
// of it as the bytes a sniffer on the bus sees, in order.
class RecordingInterposer {
 public:
  explicit RecordingInterposer(uint16_t swtpm_port);
  Status start() { return proxy_.start(); }
  // The TPM string a client connects to it with.
  std::string spec() const { return proxy_.spec(); }
  // Until no client is connected (interposer.h); swtpm is then free.
  void wait_idle() { proxy_.wait_idle(); }
  void set_rule(Rule rule);
  // Every command and response that crossed, in order.
  Bytes bus();
  std::vector<Bytes> commands();
  // Responses, by the index of the command they answer (empty: none came back).
  std::vector<Bytes> responses();

 private:
  std::mutex mu_;
  Rule rule_;
  Bytes bus_;
  std::vector<Bytes> commands_, responses_;
  Interposer proxy_;  // last: stopped before what its rule records into goes
};

// Straight to the swtpm (tpm2_getcap with its TCTI `tcti`, while no server
// holds it): no loaded or saved session, no transient object. A failed
// expectation in the calling test otherwise.
void expect_no_handles_left(const std::string& tcti);

// Per test: a directory (dir_, mode 0700), the recording interposer on the
// suite's swtpm (proxy_) and serve to start in that directory (serve_). A
// serve the test started and did not stop is stopped by TearDown, which
// expects exit 0 and nothing left on the TPM.
class InterposedServeTest : public ::testing::Test {
 protected:
  // The suite's swtpm and its null key's name (a derived suite that hides
  // these calls them).
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  static SuiteTpm& tpm() { return *tpm_; }
  // The suite's state directory for serve (TPMSEC_STATE_DIR): what serve
  // keeps of the suite's one TPM (its facts, read once) is kept across the
  // suite's tests, as a host keeps it across restarts.
  static const std::string& state_dir() { return *state_dir_; }

  void SetUp() override;
  void TearDown() override;

  // `tpmsec serve --allow-root --tpm (the interposer) --null-name NAME
  // ARGS`, until it serves (serve_process.h); `journal` as ServeProcess::start.
  void start_serve_with(const std::vector<std::string>& args, bool journal = false);
  // SIGTERM; its wait status. The interposer is idle afterwards (serve's
  // connection to the TPM is closed), so swtpm is free for a direct
  // connection.
  int stop_serve();
  std::string socket_path() const { return serve_->socket(); }
  std::string serve_log() const { return serve_->log(); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  void set_rule(Rule rule) { proxy_->set_rule(std::move(rule)); }
  Bytes bus() { return proxy_->bus(); }
  std::vector<Bytes> commands() { return proxy_->commands(); }
  // Responses, by the index of the command they answer.
  std::vector<Bytes> responses() { return proxy_->responses(); }

  std::string dir_;
  std::unique_ptr<RecordingInterposer> proxy_;
  std::unique_ptr<ServeProcess> serve_;
  bool serve_started_ = false;  // and not stopped by the test

 private:
  static SuiteTpm* tpm_;
  static std::string* state_dir_;
};

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_SERVE_FIXTURE_H_
