#include "support/serve_fixture.h"

#include <sys/wait.h>

#include <filesystem>
#include <utility>

#include "support/run_command.h"
#include "support/test_data.h"
#include "tpmsec/null_key.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"
#include "tpmsec/transport/tpm_string.h"

namespace tpmsec::testing {

bool SuiteTpm::start(std::string* error) {
  if (!swtpm.start()) {
    *error = swtpm.error();
    return false;
  }
  auto t = open_transport(swtpm.spec());
  if (!t.ok()) {
    *error = t.error().message();
    return false;
  }
  Tpm tpm(**t);
  auto key = NullKey::create(tpm, SaltKind::kEcc);
  if (!key.ok()) {
    *error = key.error().message();
    return false;
  }
  null_name = key->name_hex();
  return true;
}

RecordingInterposer::RecordingInterposer(uint16_t swtpm_port) : proxy_(swtpm_port) {
  proxy_.set_rule([this](const ProxiedCommand& c, Upstream& tpm) {
    Rule rule;
    {
      std::lock_guard<std::mutex> lock(mu_);
      rule = rule_;
    }
    Reply reply = rule ? rule(c, tpm) : pass(c, tpm);
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(c.bytes);
    responses_.push_back(reply.response.value_or(Bytes()));
    bus_.insert(bus_.end(), c.bytes.begin(), c.bytes.end());
    if (reply.response) bus_.insert(bus_.end(), reply.response->begin(), reply.response->end());
    return reply;
  });
}

void RecordingInterposer::set_rule(Rule rule) {
  std::lock_guard<std::mutex> lock(mu_);
  rule_ = std::move(rule);
}

Bytes RecordingInterposer::bus() {
  std::lock_guard<std::mutex> lock(mu_);
  return bus_;
}

std::vector<Bytes> RecordingInterposer::commands() {
  std::lock_guard<std::mutex> lock(mu_);
  return commands_;
}

std::vector<Bytes> RecordingInterposer::responses() {
  std::lock_guard<std::mutex> lock(mu_);
  return responses_;
}

void expect_no_handles_left(const std::string& tcti) {
  for (const char* kind : {"handles-loaded-session", "handles-saved-session", "handles-transient"}) {
    auto left = run_command({"tpm2_getcap", "-T", tcti, kind});
    ASSERT_EQ(left.exit_code, 0) << describe(left);
    EXPECT_EQ(left.out, "") << kind << " left on the TPM";
  }
}

SuiteTpm* InterposedServeTest::tpm_ = nullptr;
std::string* InterposedServeTest::state_dir_ = nullptr;

void InterposedServeTest::SetUpTestSuite() {
  state_dir_ = new std::string(make_temp_dir("tpmsec-serve-state"));
  ASSERT_FALSE(state_dir_->empty());
  tpm_ = new SuiteTpm;
  std::string error;
  ASSERT_TRUE(tpm_->start(&error)) << error;
}

void InterposedServeTest::TearDownTestSuite() {
  delete tpm_;
  tpm_ = nullptr;
  if (state_dir_ && !state_dir_->empty()) std::filesystem::remove_all(*state_dir_);
  delete state_dir_;
  state_dir_ = nullptr;
}

void InterposedServeTest::SetUp() {
  ASSERT_TRUE(tpm_ && tpm_->swtpm.running());
  dir_ = make_temp_dir("tpmsec-serve");
  ASSERT_FALSE(dir_.empty());
  proxy_ = std::make_unique<RecordingInterposer>(tpm_->swtpm.port());
  ASSERT_TRUE(proxy_->start().ok());
  serve_ = std::make_unique<ServeProcess>(dir_);
}

void InterposedServeTest::TearDown() {
  if (serve_started_) {
    int status = stop_serve();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "tpmsec serve ended with status " << status << "\n"
                                                               << serve_log();
    expect_no_handles_left(tpm_->swtpm.tcti());
  }
  serve_.reset();
  proxy_.reset();
  if (!dir_.empty()) std::filesystem::remove_all(dir_);
}

void InterposedServeTest::start_serve_with(const std::vector<std::string>& args, bool journal) {
  std::vector<std::string> all{"--allow-root", "--tpm", proxy_->spec(), "--null-name", tpm_->null_name};
  all.insert(all.end(), args.begin(), args.end());
  ASSERT_TRUE(serve_->start(all, {"TPMSEC_STATE_DIR=" + *state_dir_}, journal));
  serve_started_ = true;
  ASSERT_TRUE(serve_->wait_serving()) << "tpmsec serve never served:\n" << serve_log();
}

int InterposedServeTest::stop_serve() {
  int status = serve_->stop();
  serve_started_ = false;
  proxy_->wait_idle();
  return status;
}

}  // namespace tpmsec::testing
