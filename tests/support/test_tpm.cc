#include "support/test_tpm.h"

#include <sys/socket.h>
#include <unistd.h>

#include "tpmsec/transport/tpm_string.h"
#include "tpmsec/transport/transports.h"

namespace tpmsec::testing {
namespace {
SwtpmProcess* g_swtpm = nullptr;
}

std::string kind_name(TpmKind kind) {
  switch (kind) {
    case TpmKind::kEmbedded:
      return "embedded";
    case TpmKind::kSwtpm:
      return "swtpm";
    case TpmKind::kDevice:
      return "device";
  }
  return "?";
}

bool DeviceServer::start(std::string* error, std::unique_ptr<Transport> backend) {
  if (backend) {
    backend_ = std::move(backend);
  } else {
    auto embedded = open_embedded();
    if (!embedded.ok()) {
      *error = embedded.error().message();
      return false;
    }
    backend_ = std::move(*embedded);
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    *error = "socketpair failed";
    return false;
  }
  server_fd_ = fds[0];
  client_fd_ = fds[1];
  thread_ = std::thread([this] {
    Bytes buffer(64 * 1024);
    for (;;) {
      ssize_t n = ::read(server_fd_, buffer.data(), buffer.size());
      if (n <= 0) return;  // the device end was closed
      auto rsp = backend_->transmit(ByteView(buffer.data(), static_cast<size_t>(n)));
      if (!rsp.ok()) return;
      if (::write(server_fd_, rsp->data(), rsp->size()) != static_cast<ssize_t>(rsp->size())) return;
    }
  });
  return true;
}

int DeviceServer::take_client_fd() {
  int fd = client_fd_;
  client_fd_ = -1;
  return fd;
}

DeviceServer::~DeviceServer() {
  if (client_fd_ >= 0) ::close(client_fd_);
  if (server_fd_ >= 0) ::shutdown(server_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (server_fd_ >= 0) ::close(server_fd_);
}

void TpmTest::SetUpTestSuite() {}

void TpmTest::TearDownTestSuite() {
  delete g_swtpm;
  g_swtpm = nullptr;
}

SwtpmProcess* TpmTest::swtpm() {
  if (!g_swtpm) {
    g_swtpm = new SwtpmProcess;
    g_swtpm->start();
  }
  return g_swtpm;
}

void TpmTest::SetUp() {
  switch (GetParam()) {
    case TpmKind::kEmbedded: {
      auto t = open_embedded();
      ASSERT_TRUE(t.ok()) << t.error().message();
      transport_ = std::move(*t);
      break;
    }
    case TpmKind::kSwtpm: {
      SwtpmProcess* p = swtpm();
      if (!p->running()) GTEST_SKIP() << "swtpm unavailable: " << p->error();
      auto t = open_transport(p->spec());
      ASSERT_TRUE(t.ok()) << t.error().message();
      transport_ = std::move(*t);
      // A fresh TPM per test: TPM Reset through the control channel.
      Status st = transport_->reset_tpm();
      ASSERT_TRUE(st.ok()) << st.error().message();
      break;
    }
    case TpmKind::kDevice: {
      device_server_ = std::make_unique<DeviceServer>();
      std::string error;
      ASSERT_TRUE(device_server_->start(&error)) << error;
      transport_ = device_from_fd(device_server_->take_client_fd(), "socketpair");
      break;
    }
  }
  tpm_ = std::make_unique<Tpm>(*transport_);
}

void TpmTest::TearDown() {
  tpm_.reset();
  transport_.reset();  // closes the device end, ending the server thread
  device_server_.reset();
}

std::string TpmTest::spec() const { return g_swtpm ? g_swtpm->spec() : ""; }

::testing::internal::ParamGenerator<TpmKind> all_tpm_kinds() {
  return ::testing::Values(TpmKind::kEmbedded, TpmKind::kSwtpm, TpmKind::kDevice);
}

::testing::internal::ParamGenerator<TpmKind> platform_tpm_kinds() {
  return ::testing::Values(TpmKind::kEmbedded, TpmKind::kSwtpm);
}

std::string tpm_kind_param_name(const ::testing::TestParamInfo<TpmKind>& info) { return kind_name(info.param); }

}  // namespace tpmsec::testing
