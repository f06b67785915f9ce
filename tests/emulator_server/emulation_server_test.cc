// The emulation server (tpmsec-server/emulator_server/emulation_server.h) in this process, on the
// embedded libtpms, driven by real clients over loopback: several clients at
// once, a stalled client that holds up no one, and what the server keeps
// while it serves (its counters, read once its loop has returned).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/swtpm_process.h"
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

constexpr int kClientTimeoutMs = 10'000;  // a blocking server keeps a client waiting past this

// A server on a free port pair, its loop on a thread of its own; pause()
// ends the loop (the clients stay connected) so that its counters can be
// read, resume() serves again.
class InProcessServer {
 public:
  bool start(EmulationServerOptions options, const std::string& profile = "slb9670") {
    auto p = load_profile(profile);
    if (!p.ok()) return false;
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto tpm = open_embedded();
      if (!tpm.ok()) return false;
      options.port = testing::pick_port_pair();
      options.real_clock = false;
      options.quiet = true;
      auto s = EmulationServer::start(options, *p, std::move(*tpm), &stop_);
      if (s.ok()) {
        server_ = std::move(*s);
        port_ = options.port;
        resume();
        return true;
      }
    }
    return false;
  }
  ~InProcessServer() { pause(); }

  void resume() {
    stop_ = false;
    loop_ = std::thread([this] { status_ = server_->run(); });
  }
  EmulationServerStats pause() {
    stop_ = true;
    if (loop_.joinable()) loop_.join();
    return server_ ? server_->stats() : EmulationServerStats{};
  }
  // Paused once every client's close was handled (at most 10 s).
  EmulationServerStats settle() {
    for (int i = 0; i < 100; ++i) {
      EmulationServerStats s = pause();
      if (s.clients == 0) return s;
      resume();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pause();
  }
  uint16_t port() const { return port_; }
  Status status() const { return status_; }

 private:
  std::unique_ptr<EmulationServer> server_;
  std::atomic<bool> stop_{false};
  std::thread loop_;
  Status status_ = ok_status();
  uint16_t port_ = 0;
};

int connect_to(uint16_t port) { return testing::connect_loopback(port); }

// Reads exactly out.size() bytes, each within kClientTimeoutMs.
bool read_exact(int fd, uint8_t* out, size_t n) {
  for (size_t got = 0; got < n;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kClientTimeoutMs) <= 0) return false;
    ssize_t r = ::read(fd, out + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

// One command over a raw swtpm data connection; empty when no answer came in time.
Bytes round_trip(int fd, const Bytes& command) {
  if (::send(fd, command.data(), command.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(command.size())) return {};
  Bytes header(10);
  if (!read_exact(fd, header.data(), header.size())) return {};
  uint32_t size = load_be32(header.data() + 2);
  if (size < 10 || size > 4096) return {};
  header.resize(size);
  if (size > 10 && !read_exact(fd, header.data() + 10, size - 10)) return {};
  return header;
}

uint32_t rc_of(const Bytes& response) { return response.size() >= 10 ? load_be32(response.data() + 6) : 0xFFFFFFFF; }

const Bytes kGetRandom8 = *from_hex("80010000000c0000017b0008");

// True when the server closed `fd` (its end of the stream is readable now).
bool closed_by_server(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  uint8_t b;
  return ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

// Two clients connected at once, their commands interleaved: each gets its
// own answers, and both see the one TPM (an extend by one is read by the other).
TEST(EmulationServer, TwoClientsInterleavedGetCorrectAnswers) {
  InProcessServer server;
  ASSERT_TRUE(server.start({}));
  auto a = open_swtpm({.host = "127.0.0.1", .port = server.port()});
  auto b = open_swtpm({.host = "127.0.0.1", .port = server.port()});
  ASSERT_TRUE(a.ok() && b.ok());
  Tpm tpm_a(**a), tpm_b(**b);
  Bytes expected(32, 0);
  for (uint8_t i = 1; i <= 3; ++i) {
    auto ra = tpm_a.run(cmd::GetRandom{16});
    ASSERT_TRUE(ra.ok()) << ra.error().message();
    EXPECT_EQ(ra->random_bytes.bytes.size(), 16u);
    Bytes digest(32, i);
    ASSERT_TRUE(pcr_extend(tpm_b, alg::kSha256, 16, digest).ok());
    expected = *crypto::hash(alg::kSha256, {expected, digest});
    auto read = pcr_read(tpm_a, alg::kSha256, 16);  // A reads what B extended
    ASSERT_TRUE(read.ok()) << read.error().message();
    EXPECT_EQ(to_hex(*read), to_hex(expected)) << i;
  }
  EmulationServerStats s = server.pause();
  EXPECT_EQ(s.clients, 2u);  // both still connected
  EXPECT_GE(s.commands, 9u);
  EXPECT_TRUE(server.status().ok());
}

// A client that sends half a frame and stops holds up no one: another
// client's commands are answered while the first is still connected with
// its frame unfinished (a server that waited for it would answer only after
// dropping it, or never).
TEST(EmulationServer, StalledHalfFrameClientDoesNotStopAnother) {
  InProcessServer server;
  EmulationServerOptions options;
  options.frame_timeout_ms = 120'000;  // longer than this test: the stalled client stays
  ASSERT_TRUE(server.start(options));
  int stalled = connect_to(server.port());
  ASSERT_GE(stalled, 0);
  ASSERT_EQ(::send(stalled, kGetRandom8.data(), 5, MSG_NOSIGNAL), 5);  // half a header
  int other = connect_to(server.port());
  ASSERT_GE(other, 0);
  for (int i = 0; i < 5; ++i) {
    Bytes r = round_trip(other, kGetRandom8);
    ASSERT_EQ(r.size(), 20u) << i;
    EXPECT_EQ(rc_of(r), 0u);
  }
  EXPECT_FALSE(closed_by_server(stalled));
  // The stalled client finishes its frame after all and is answered.
  ASSERT_EQ(::send(stalled, kGetRandom8.data() + 5, kGetRandom8.size() - 5, MSG_NOSIGNAL), 7);
  Bytes late(20);
  ASSERT_TRUE(read_exact(stalled, late.data(), late.size()));
  EXPECT_EQ(rc_of(late), 0u);
  ::close(stalled);
  ::close(other);
  EXPECT_EQ(server.pause().dropped, 0u);
}

// A started frame has a deadline for the whole frame, not per byte: a
// client trickling a byte at a time is dropped too.
TEST(EmulationServer, StalledAndTricklingClientsAreDropped) {
  InProcessServer server;
  EmulationServerOptions options;
  options.frame_timeout_ms = 300;
  ASSERT_TRUE(server.start(options));
  int stalled = connect_to(server.port());
  int trickling = connect_to(server.port());
  ASSERT_GE(stalled, 0);
  ASSERT_GE(trickling, 0);
  ASSERT_EQ(::send(stalled, kGetRandom8.data(), 5, MSG_NOSIGNAL), 5);
  Bytes frame = *from_hex("800100000fff0000017b");  // declares 4095 bytes
  frame.resize(4095);
  bool trickle_closed = false;
  auto started = std::chrono::steady_clock::now();
  for (size_t i = 0; i < frame.size() && std::chrono::steady_clock::now() - started < std::chrono::seconds(30); ++i) {
    if (::send(trickling, &frame[i], 1, MSG_NOSIGNAL) != 1 || closed_by_server(trickling)) {
      trickle_closed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a byte well within any per-read timeout
  }
  EXPECT_TRUE(trickle_closed);
  Bytes b(1);
  EXPECT_FALSE(read_exact(stalled, b.data(), 1));  // closed, no answer
  ::close(stalled);
  ::close(trickling);
  EXPECT_EQ(server.pause().dropped, 2u);
}

// What the server keeps does not grow with the commands it serves: no
// per-command record unless a bench result is asked for, then at most
// max_records; the totals have a row per kind of command, bounded however
// many kinds a client invents; a closed client leaves no handle bookkeeping.
TEST(EmulationServer, RetainedStateDoesNotGrowWithCommands) {
  {
    InProcessServer server;
    EmulationServerOptions options;
    options.private_handles = true;
    ASSERT_TRUE(server.start(options));
    int fd = connect_to(server.port());
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(rc_of(round_trip(fd, kGetRandom8)), 0u) << i;
    EmulationServerStats first = server.pause();
    server.resume();
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(rc_of(round_trip(fd, kGetRandom8)), 0u) << i;
    // Made-up command codes (vendor-specific: libtpms refuses each), one kind each.
    Bytes vendor = *from_hex("80010000000a20000000");
    for (uint32_t i = 0; i < EmulationServer::kMaxVariants + 100; ++i) {
      store_be32(vendor.data() + 6, 0x20000000u + i);
      ASSERT_NE(round_trip(fd, vendor).size(), 0u) << i;
    }
    ::close(fd);
    // Clients that each leave a session behind, flushed when they close.
    for (int i = 0; i < 20; ++i) {
      auto t = open_swtpm({.host = "127.0.0.1", .port = server.port()});
      ASSERT_TRUE(t.ok());
      Tpm tpm(**t);
      cmd::StartAuthSession start;
      start.nonce_caller.bytes = Bytes(32, 0x11);
      ASSERT_TRUE(tpm.run(start).ok());
    }
    {
      auto t = open_swtpm({.host = "127.0.0.1", .port = server.port()});  // served after the closes
      ASSERT_TRUE(t.ok());
      Tpm tpm(**t);
      auto loaded = tpm.list_handles(ht::kFirstLoadedSession);
      ASSERT_TRUE(loaded.ok());
      EXPECT_TRUE(loaded->empty());
    }
    EmulationServerStats last = server.settle();
    EXPECT_EQ(first.records, 0u);
    EXPECT_EQ(last.records, 0u);
    EXPECT_EQ(first.commands, 1000u);
    EXPECT_GE(last.commands, 3000u + EmulationServer::kMaxVariants + 100);
    EXPECT_EQ(last.variants, EmulationServer::kMaxVariants);
    EXPECT_EQ(last.clients, 0u);
    EXPECT_EQ(last.handle_entries, 0u);
  }
  {
    InProcessServer server;
    EmulationServerOptions options;
    options.keep_records = true;  // --json, --trace
    options.max_records = 100;
    ASSERT_TRUE(server.start(options));
    int fd = connect_to(server.port());
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 300; ++i) ASSERT_EQ(rc_of(round_trip(fd, kGetRandom8)), 0u) << i;
    ::close(fd);
    EmulationServerStats s = server.pause();
    EXPECT_EQ(s.commands, 300u);
    EXPECT_EQ(s.records, 100u);
  }
}

}  // namespace
}  // namespace tpmsec
