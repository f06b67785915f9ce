// Real TPMs for tests, one fresh TPM per test, reached over each transport:
//   kEmbedded  in-process libtpms (re-manufactured per test)
//   kSwtpm     a swtpm process per test suite, reset through its control channel per test
//   kDevice    the device transport over a SOCK_SEQPACKET socketpair whose far
//              end is served by the in-process libtpms (one write, one read per
//              command, as /dev/tpm0 behaves)
#ifndef TPMSEC_TESTS_SUPPORT_TEST_TPM_H_
#define TPMSEC_TESTS_SUPPORT_TEST_TPM_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "support/swtpm_process.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport.h"

namespace tpmsec::testing {

enum class TpmKind { kEmbedded, kSwtpm, kDevice };
std::string kind_name(TpmKind kind);

// Serves TPM commands arriving on one end of a socketpair from the embedded TPM.
class DeviceServer {
 public:
  // Opens the embedded TPM (or serves `backend`, e.g. a swtpm or an
  // interposer) and starts serving; take_client_fd() is the device end.
  bool start(std::string* error, std::unique_ptr<Transport> backend = nullptr);
  ~DeviceServer();
  int take_client_fd();
  Transport* backend() { return backend_.get(); }

 private:
  std::unique_ptr<Transport> backend_;
  int server_fd_ = -1;
  int client_fd_ = -1;
  std::thread thread_;
};

// Base fixture: parametrize with TpmKind. The swtpm process is shared by the
// suite and stopped by PID after it.
class TpmTest : public ::testing::TestWithParam<TpmKind> {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();

 protected:
  void SetUp() override;
  void TearDown() override;

  Tpm& tpm() { return *tpm_; }
  Transport& transport() { return *transport_; }
  // The TPM string that reaches this test's TPM from another process (swtpm only).
  std::string spec() const;

  static SwtpmProcess* swtpm();

 private:
  std::unique_ptr<DeviceServer> device_server_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Tpm> tpm_;
};

// Every kind, for INSTANTIATE_TEST_SUITE_P.
::testing::internal::ParamGenerator<TpmKind> all_tpm_kinds();
// The TPMs whose platform a test controls (reset, Shutdown/Startup): not a
// device, where only the kernel does.
::testing::internal::ParamGenerator<TpmKind> platform_tpm_kinds();
std::string tpm_kind_param_name(const ::testing::TestParamInfo<TpmKind>& info);

}  // namespace tpmsec::testing

#endif  // TPMSEC_TESTS_SUPPORT_TEST_TPM_H_
