// `tpmsec emulate --ctrl-unix PATH` as qemu's tpm-emulator backend sees it
// (qemu's backends/tpm/tpm_emulator.c, swtpm's include/swtpm/tpm_ioctl.h):
// the emulation server in this process, on the embedded libtpms behind the
// SLB9670 profile, driven over its Unix control socket with qemu's own
// sequence, byte for byte (CMD_SET_DATAFD with the data channel's socket as
// SCM_RIGHTS, the TPM 2 probe on it, CMD_GET_CAPABILITY, CMD_STOP and
// CMD_SET_BUFFERSIZE twice, CMD_INIT, the ptm_* requests at their structure
// sizes), then TPM commands on the handed-over socketpair end as the guest's
// driver sends them, and what the emulator accounted for them. Then the
// control socket as a hostile peer uses it.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <thread>

#include "support/fd_passing.h"
#include "tpmsec-server/emulator_server/emulation_server.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/crypto.h"
#include "tpmsec/emulation/profile_file.h"
#include "tpmsec/pcr.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

constexpr int kTimeoutMs = 10'000;  // a server that never answers fails the test, never hangs it

// swtpm's control commands (tpm_ioctl.h) and capability bits.
constexpr uint32_t kGetCapability = 1, kInit = 2, kShutdown = 3, kGetEstablished = 4, kSetLocality = 5, kCancel = 9,
                   kResetEstablished = 11, kStop = 14, kSetDataFd = 16, kSetBufferSize = 17;
// What qemu's tpm_emulator_check_caps requires of a TPM 2.
constexpr uint64_t kQemuRequiredCaps = 1 | 2 | 4 | 8 | 0x80 | 0x1000 | 0x400 | 0x2000;

// A server on a fresh socket path, its loop on a thread of its own.
class QemuBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tpmsec-qemu-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/ctrl.sock";
    auto profile = load_profile("slb9670");
    ASSERT_TRUE(profile.ok()) << profile.error().message();
    auto tpm = open_embedded();
    ASSERT_TRUE(tpm.ok()) << tpm.error().message();
    EmulationServerOptions options;
    options.ctrl_unix = path_;
    options.real_clock = false;
    options.quiet = true;
    options.keep_records = true;
    options.frame_timeout_ms = 2'000;
    auto s = EmulationServer::start(options, *profile, std::move(*tpm), &stop_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    server_ = std::move(*s);
    loop_ = std::thread([this] { status_ = server_->run(); });
  }
  void TearDown() override {
    stop_ = true;
    if (loop_.joinable()) loop_.join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A control connection, as qemu's -chardev socket,path=... opens it.
  int connect_ctrl() const {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  std::string dir_, path_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<EmulationServer> server_;
  std::thread loop_;
  Status status_ = ok_status();
};

bool read_exact(int fd, uint8_t* out, size_t n) {
  for (size_t got = 0; got < n;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kTimeoutMs) <= 0) return false;
    ssize_t r = ::read(fd, out + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// One control request (code and fields, one write as qemu's
// qemu_chr_fe_write_all, `pass` attached as SCM_RIGHTS when >= 0), and
// `answer_bytes` of answer; empty when they did not come in time.
Bytes control(int fd, uint32_t code, const Bytes& fields, size_t answer_bytes, int pass = -1) {
  Bytes request = be32(code);
  request.insert(request.end(), fields.begin(), fields.end());
  const bool sent =
      pass >= 0 ? testing::send_fd(fd, pass, request.data(), request.size())
                : ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size());
  if (!sent) return {};
  Bytes answer(answer_bytes);
  if (!read_exact(fd, answer.data(), answer.size())) return {};
  return answer;
}

std::string hex(const Bytes& b) { return to_hex(b); }

// A ptm_* request with a locality: the u8 first, in the 4-byte union.
Bytes loc_struct(uint8_t locality) { return Bytes{locality, 0, 0, 0}; }

// True when the peer of `fd` closed (EOF readable within the timeout).
bool peer_closed(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, kTimeoutMs) <= 0) return false;
  uint8_t b;
  return ::recv(fd, &b, 1, MSG_DONTWAIT) == 0;
}

// qemu's start-up, as tpm_emulator_handle_device_opts and the TIS reset
// run it: the data channel handed over and probed, the capabilities, the
// buffer size (each CMD_SET_BUFFERSIZE after a CMD_STOP), CMD_INIT.
void qemu_start(int ctrl, int& data) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  EXPECT_EQ(hex(control(ctrl, kSetDataFd, {}, 4, pair[1])), "00000000");
  ::close(pair[1]);
  data = pair[0];
  // tpm_util_test_tpmdev: a TPM 2 ReadClock; a TPM 2 answers with a TPM 2 tag.
  const Bytes probe = *from_hex("80010000000a00000181");
  ASSERT_EQ(::write(data, probe.data(), probe.size()), static_cast<ssize_t>(probe.size()));
  Bytes header(10);
  ASSERT_TRUE(read_exact(data, header.data(), header.size()));
  EXPECT_EQ(hex(Bytes(header.begin(), header.begin() + 2)), "8001");
  Bytes rest(load_be32(header.data() + 2) - 10);
  ASSERT_TRUE(read_exact(data, rest.data(), rest.size()));
  const Bytes caps = control(ctrl, kGetCapability, {}, 8);
  ASSERT_EQ(caps.size(), 8u);
  const uint64_t bits = (uint64_t{load_be32(caps.data())} << 32) | load_be32(caps.data() + 4);
  EXPECT_EQ(bits & kQemuRequiredCaps, kQemuRequiredCaps);
  for (uint32_t wanted : {0u, 4096u}) {
    EXPECT_EQ(hex(control(ctrl, kStop, {}, 4)), "00000000");
    const Bytes sizes = control(ctrl, kSetBufferSize, be32(wanted), 16);
    ASSERT_EQ(sizes.size(), 16u);
    EXPECT_EQ(load_be32(sizes.data()), 0u);
    EXPECT_EQ(load_be32(sizes.data() + 4), 4096u);  // buffersize, then min and max
  }
  EXPECT_EQ(hex(control(ctrl, kInit, be32(0), 4)), "00000000");
}

TEST_F(QemuBackend, QemusSequenceThenTheGuestsCommandsAccountedExactly) {
  int ctrl = connect_ctrl();
  ASSERT_GE(ctrl, 0);
  int data = -1;
  qemu_start(ctrl, data);
  ASSERT_GE(data, 0);
  std::unique_ptr<Transport> device = device_from_fd(data, "qemu data channel");
  Tpm tpm(*device);
  auto started = tpm.run(cmd::Startup{});
  ASSERT_TRUE(started.ok()) << started.error().message();
  // The locality in ptm_loc's 4 bytes: PCR 20 resets from locality 2 only (PC Client).
  EXPECT_EQ(hex(control(ctrl, kSetLocality, loc_struct(2), 4)), "00000000");
  EXPECT_TRUE(pcr_reset(tpm, 20).ok());
  EXPECT_EQ(hex(control(ctrl, kSetLocality, loc_struct(0), 4)), "00000000");
  EXPECT_FALSE(pcr_reset(tpm, 20).ok());
  // An extend lands: read back through the emulator.
  const Bytes digest(32, 0x5a);
  ASSERT_TRUE(pcr_extend(tpm, alg::kSha256, 16, digest).ok());
  auto pcr = pcr_read(tpm, alg::kSha256, 16);
  ASSERT_TRUE(pcr.ok()) << pcr.error().message();
  const Bytes zeros(32, 0);
  EXPECT_EQ(hex(*pcr), hex(*crypto::hash(alg::kSha256, {zeros, digest})));
  // The TIS's other signals, at their structure sizes.
  const Bytes est = control(ctrl, kGetEstablished, {}, 8);
  EXPECT_EQ(hex(est).substr(0, 8), "00000000");
  EXPECT_EQ(hex(control(ctrl, kResetEstablished, loc_struct(3), 4)), "00000000");
  EXPECT_EQ(hex(control(ctrl, kCancel, {}, 4)), "00000000");
  // qemu's finalize: CMD_SHUTDOWN ends the server's loop.
  EXPECT_EQ(hex(control(ctrl, kShutdown, {}, 4)), "00000000");
  loop_.join();
  EXPECT_TRUE(status_.ok()) << status_.error().message();
  ::close(ctrl);
  // Every data command accounted: the probe, Startup, two PCR_Resets, the extend, the read.
  const EmulationServerStats stats = server_->stats();
  EXPECT_EQ(stats.commands, 6u);
  const BenchResult result = server_->result();
  double sum_ms = 0;
  size_t samples = 0;
  for (const auto& p : result.primitives) {
    for (const auto& s : p.samples) {
      sum_ms += s.tpm_ms;
      ++samples;
      EXPECT_GT(s.tpm_ms, 0.0) << p.name;
    }
  }
  EXPECT_EQ(samples, 6u);
  // The totals' line is the sum of the per-command records (the SLB9670's extend alone is milliseconds).
  std::smatch m;
  const std::string totals = server_->totals();
  ASSERT_TRUE(std::regex_search(totals, m, std::regex(R"((\d+) TPM commands, ([0-9.]+) ms modelled)"))) << totals;
  EXPECT_EQ(m[1].str(), "6");
  EXPECT_EQ(m[2].str(), fmt::format("{:.2f}", sum_ms));
  EXPECT_GT(sum_ms, 1.0);
}

// The control socket as a hostile peer uses it: descriptors sent with the
// wrong request, or of the wrong kind, are closed and refused; bad fields
// and unknown codes get swtpm's error answers; a stalled request is cut off;
// none of it stops the next connection from being served.
TEST_F(QemuBackend, HostilePeerGetsErrorsAndTheNextConnectionIsServed) {
  int ctrl = connect_ctrl();
  ASSERT_GE(ctrl, 0);
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  EXPECT_EQ(control(ctrl, kGetCapability, {}, 8, pair[1]).size(), 8u);  // a descriptor it did not ask for
  ::close(pair[1]);
  EXPECT_TRUE(peer_closed(pair[0]));  // the server closed its copy: nobody holds the other end
  ::close(pair[0]);
  EXPECT_EQ(hex(control(ctrl, kSetDataFd, {}, 4)), "00000009");  // no descriptor: TPM_FAIL
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_EQ(hex(control(ctrl, kSetDataFd, {}, 4, pipe_fds[0])), "00000009");  // not a stream socket
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  EXPECT_EQ(hex(control(ctrl, kSetLocality, loc_struct(9), 4)), "00000003");  // TPM_BAD_PARAMETER
  EXPECT_EQ(hex(control(ctrl, 0xdeadbeef, {}, 4)), "0000000a");               // TPM_BAD_ORDINAL, then closed
  EXPECT_TRUE(peer_closed(ctrl));
  ::close(ctrl);
  // A request cut short and left: answered TPM_BAD_PARAMETER after the frame timeout, closed.
  ctrl = connect_ctrl();
  ASSERT_GE(ctrl, 0);
  const Bytes partial = {0, 0, 0, kSetLocality, 2};
  ASSERT_EQ(::write(ctrl, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  Bytes cut(4);
  ASSERT_TRUE(read_exact(ctrl, cut.data(), cut.size()));
  EXPECT_EQ(hex(cut), "00000003");
  EXPECT_TRUE(peer_closed(ctrl));
  ::close(ctrl);
  // And the next client (qemu started again) is served, a request split over two writes too.
  ctrl = connect_ctrl();
  ASSERT_GE(ctrl, 0);
  int data = -1;
  qemu_start(ctrl, data);
  const Bytes split = {0, 0, 0, kSetLocality, 1, 0, 0, 0};
  ASSERT_EQ(::write(ctrl, split.data(), 5), 5);
  ASSERT_EQ(::write(ctrl, split.data() + 5, 3), 3);
  Bytes answer(4);
  ASSERT_TRUE(read_exact(ctrl, answer.data(), answer.size()));
  EXPECT_EQ(hex(answer), "00000000");
  ::close(data);
  // A stop (SIGTERM) ends the server although the control connection stays open.
  stop_ = true;
  loop_.join();
  EXPECT_TRUE(status_.ok()) << status_.error().message();
  ::close(ctrl);
}

}  // namespace
}  // namespace tpmsec
