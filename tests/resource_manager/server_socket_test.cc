// The server (tpmsec-server/resource_manager/server.h) in this process on the embedded
// libtpms, driven over real sockets: a raw Unix-socket client with
// /dev/tpmrm0 semantics (one write, one read), a connected socket handed over
// with Server::connect (the D-Bus front end's way), frame limits and deadlines,
// and clients that disconnect in the middle of a command or are killed:
// afterwards a direct GetCapability on the TPM (past the server, while its
// loop is paused) finds nothing of theirs.
#include <grp.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "support/fd_passing.h"
#include "support/raw_client.h"
#include "support/test_data.h"
#include "support/tpm_frames.h"
#include "tpmsec-server/resource_manager/handle_space.h"
#include "tpmsec-server/resource_manager/server.h"
#include "tpmsec-server/socket_front/socket_front.h"
#include "tpmsec/commands.h"
#include "tpmsec/constants.h"
#include "tpmsec/null_key.h"
#include "tpmsec/tpm.h"
#include "tpmsec/transport/transports.h"
#include "tpmsec/wire.h"

namespace tpmsec {
namespace {

using server::ClientLimits;
using server::PeerIdentity;
using server::Server;
using server::ServerOptions;
using testing::build_command;
using testing::CommandFrame;
using testing::response_code_of;

using testing::kGetRandom8;
constexpr uint32_t kHandle1 = 0x18B;  // TPM_RC_HANDLE for the first handle (+ TPM_RC_H + TPM_RC_1)

// A typed command's parameters, marshalled as Tpm::run would.
// A connected socket handed to the server as a front end hands one.
Result<server::ClientId> hand_over(Server& server, int fd, ClientLimits limits = {}, PeerIdentity peer = {},
                                   std::function<void()> on_closed = {}) {
  server::ClientConnection c;
  c.socket = UniqueFd(fd);
  c.limits = limits;
  c.peer = peer;
  c.front = "handed over";
  c.on_closed = std::move(on_closed);
  return server.connect(std::move(c));
}

template <class C>
Bytes params_of(const C& command) {
  Writer w;
  marshal_all(w, command.params());
  auto r = w.finish();
  return r.ok() ? *r : Bytes{};
}

class RunningServer {
 public:
  bool start(ServerOptions options = {}) {
    auto tpm = open_embedded();
    if (!tpm.ok()) return false;
    tpm_ = std::move(*tpm);
    auto s = Server::create(*tpm_, std::move(options));
    if (!s.ok()) return false;
    server_ = std::move(*s);
    return true;
  }
  // start(), then a socket at `path` (socket_front::listen_unix, its
  // default mode); the loop not yet running.
  bool start_on(const std::string& path, ServerOptions options = {}) {
    return start(std::move(options)) && socket_front::listen_unix(server(), path).ok();
  }
  ~RunningServer() { destroy(); }
  // Ends the server as SIGTERM does: its loop, then the Server (closing
  // every client, flushing what each created).
  void destroy() {
    pause();
    server_.reset();
  }
  Server& server() { return *server_; }
  void resume() {
    stop_ = false;
    loop_ = std::thread([this] { (void)server_->run(stop_); });
  }
  server::ServerStats pause() {
    stop_ = true;
    if (loop_.joinable()) loop_.join();
    return server_ ? server_->stats() : server::ServerStats{};
  }
  // Paused once every client's close was handled (at most 10 s).
  server::ServerStats settle() {
    for (int i = 0; i < 100; ++i) {
      server::ServerStats s = pause();
      if (s.clients == 0) return s;
      resume();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pause();
  }
  // What the TPM holds, read past the server (paused).
  std::vector<uint32_t> on_tpm() {
    Tpm direct(*tpm_);
    std::vector<uint32_t> out;
    for (uint32_t first : {ht::kFirstTransient, ht::kFirstLoadedSession, ht::kFirstSavedSession}) {
      auto listed = direct.list_handles(first);
      EXPECT_TRUE(listed.ok()) << listed.error().message();
      if (listed.ok()) out.insert(out.end(), listed->begin(), listed->end());
    }
    return out;
  }

 private:
  std::unique_ptr<Transport> tpm_;
  std::unique_ptr<Server> server_;
  std::atomic<bool> stop_{false};
  std::thread loop_;
};

std::string temp_dir() { return testing::make_temp_dir("tpmsec-server"); }

using testing::connect_unix;

// Reads one whole response (header first, then what its size says); empty
// when the server closed, or after 10 s.
Bytes read_response(int fd) {
  Bytes out;
  size_t want = 10;
  while (out.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) return {};
    uint8_t buf[4096];
    ssize_t n = ::read(fd, buf, std::min(sizeof(buf), want - out.size()));
    if (n <= 0) return {};
    out.insert(out.end(), buf, buf + n);
    if (out.size() == 10) want = load_be32(out.data() + 2);
    if (want > 4096 || want < 10) return {};
  }
  return out;
}

// One command written at once, one response read: /dev/tpmrm0's way.
Bytes round_trip(int fd, ByteView command) {
  if (::write(fd, command.data(), command.size()) != static_cast<ssize_t>(command.size())) return {};
  return read_response(fd);
}

// True when the server closes `fd` within 10 s.
bool closed_by_server(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 10'000) <= 0) return false;
  uint8_t b;
  return ::read(fd, &b, 1) <= 0;
}

Bytes primary_command() {
  cmd::CreatePrimary c;
  c.primary_handle = NamedHandle::of(rh::kNull);
  c.in_public.public_area = null_key_template(SaltKind::kEcc);
  CommandFrame frame;
  frame.code = cmd::CreatePrimary::kInfo.code;
  frame.handles = {rh::kNull};
  frame.sessions = {testing::SessionEntry{rh::kPasswordSession, {}, attr::kContinueSession, {}}};
  frame.parameters = params_of(c);
  return build_command(frame);
}

Bytes session_command() {
  cmd::StartAuthSession s;
  s.nonce_caller.bytes = Bytes(32, 0x42);
  CommandFrame frame;
  frame.code = cmd::StartAuthSession::kInfo.code;
  frame.handles = {rh::kNull, rh::kNull};
  frame.parameters = params_of(s);
  return build_command(frame);
}

TEST(ServerSocket, RawUnixSocketClientWritesOneCommandAndReadsOneResponse) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/tpmrm.sock";
  RunningServer s;
  ASSERT_TRUE(s.start());
  group* own = ::getgrgid(::getgid());
  ASSERT_NE(own, nullptr);
  ASSERT_TRUE(socket_front::listen_unix(s.server(), path, {0660, own->gr_name}).ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, ::getgid());
  s.resume();
  int fd = connect_unix(path);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 3; ++i) {
    Bytes r = round_trip(fd, kGetRandom8);
    ASSERT_EQ(r.size(), 20u);
    EXPECT_EQ(response_code_of(r), 0u);
  }
  Bytes created = round_trip(fd, primary_command());
  ASSERT_EQ(response_code_of(created), 0u);
  EXPECT_EQ(load_be32(created.data() + 10) >> 16, 0x80FFu);  // a virtual handle
  ::close(fd);
  // This process lives on, and its space with its primary (they follow the
  // process, not the connection) until the server ends.
  EXPECT_EQ(s.settle().spaces, 1u);
  EXPECT_EQ(s.on_tpm().size(), 1u);
  s.destroy();
  EXPECT_TRUE(s.on_tpm().empty());
  std::filesystem::remove_all(dir);
}

// The server reads what a socket has at once (one system call for a
// request that arrived whole) and hands the protocol only as much as it asks
// for: a client that writes three commands in one write gets three answers,
// in order, each its own, although the socket has nothing more to say after
// the first read.
TEST(ServerSocket, CommandsWrittenTogetherAreServedOneByOne) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/tpmrm.sock";
  RunningServer s;
  ASSERT_TRUE(s.start_on(path));
  s.resume();
  int fd = connect_unix(path);
  ASSERT_GE(fd, 0);
  const Bytes get_random16 = {0x80, 0x01, 0, 0, 0, 0x0c, 0, 0, 0x01, 0x7b, 0, 16};
  Bytes three = kGetRandom8;
  three.insert(three.end(), get_random16.begin(), get_random16.end());
  three.insert(three.end(), kGetRandom8.begin(), kGetRandom8.end());
  ASSERT_EQ(::write(fd, three.data(), three.size()), static_cast<ssize_t>(three.size()));
  for (size_t random_bytes : {8u, 16u, 8u}) {
    Bytes r = read_response(fd);
    ASSERT_EQ(r.size(), 12 + random_bytes);  // empty: not answered within 10 s
    EXPECT_EQ(response_code_of(r), 0u);
    EXPECT_EQ(size_t{r[10]} << 8 | r[11], random_bytes);
  }
  ::close(fd);
  s.settle();
  std::filesystem::remove_all(dir);
}

// A socket the caller connected (the D-Bus front end's socketpair end),
// handed over with its limits: served like a listener's client; a frame
// above its limit is refused (TPM_RC_COMMAND_SIZE) and the connection
// closed; a client that stops in the middle of a frame is dropped.
TEST(ServerSocket, ConnectTakesAConnectedSocketWithItsLimits) {
  RunningServer s;
  ASSERT_TRUE(s.start());
  s.resume();
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ClientLimits limits;
  limits.max_frame_bytes = 64;
  limits.frame_timeout_ms = 200;
  std::atomic<int> closed{0};
  auto id = hand_over(s.server(), pair[1], limits, PeerIdentity{1234}, [&closed] { ++closed; });
  ASSERT_TRUE(id.ok()) << id.error().message();
  Bytes r = round_trip(pair[0], kGetRandom8);
  EXPECT_EQ(response_code_of(r), 0u);
  Bytes big = kGetRandom8;
  store_be32(big.data() + 2, 65);
  big.resize(65);
  r = round_trip(pair[0], big);
  EXPECT_EQ(response_code_of(r), rc::kCommandSize);
  EXPECT_TRUE(closed_by_server(pair[0]));
  ::close(pair[0]);
  // Its front hears of the close once, on the loop's thread.
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       closed.load() == 0 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(closed.load(), 1);

  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ASSERT_TRUE(hand_over(s.server(), pair[1], limits).ok());
  ASSERT_EQ(::write(pair[0], kGetRandom8.data(), 5), 5);
  EXPECT_TRUE(closed_by_server(pair[0]));
  ::close(pair[0]);
  EXPECT_GE(s.settle().dropped, 1u);
  // Not a stream socket: refused, and closed.
  int dgram[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, dgram), 0);
  EXPECT_FALSE(hand_over(s.server(), dgram[1]).ok());
  ::close(dgram[0]);
}

// Clients that end in the middle of a command: one closes after half a
// frame, one is killed (SIGKILL) while the server waits for the rest of its
// frame. Each had a primary key and a session: nothing is left on the TPM.
// A space per connection (as the D-Bus front's), so the connection this
// process closes takes its handles along.
TEST(ServerSocket, ClientsThatDieMidCommandLeaveNothing) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  RunningServer s;
  ServerOptions options;
  options.spaces_follow_processes = false;
  ASSERT_TRUE(s.start_on(path, options));
  s.resume();
  const Bytes primary = primary_command();
  const Bytes session = session_command();
  {
    int fd = connect_unix(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(response_code_of(round_trip(fd, primary)), 0u);
    ASSERT_EQ(response_code_of(round_trip(fd, session)), 0u);
    ASSERT_EQ(::write(fd, primary.data(), primary.size() / 2), static_cast<ssize_t>(primary.size() / 2));
    ::close(fd);
  }
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only system calls on buffers made before the fork.
    int fd = connect_unix(path);
    uint8_t buf[4096];
    bool ok = fd >= 0 && ::write(fd, primary.data(), primary.size()) > 0 && ::read(fd, buf, sizeof(buf)) > 0 &&
              ::write(fd, session.data(), session.size()) > 0 && ::read(fd, buf, sizeof(buf)) > 0 &&
              ::write(fd, session.data(), 7) == 7;
    char c = ok ? 1 : 0;
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  EXPECT_EQ(c, 1);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  server::ServerStats stats = s.settle();
  EXPECT_EQ(stats.clients, 0u);
  EXPECT_EQ(stats.handle_entries, 0u);
  EXPECT_TRUE(s.on_tpm().empty());
  std::filesystem::remove_all(dir);
}

// Ending the server with clients still connected (SIGTERM) flushes what
// they created; a peer uid has at most max_clients_per_uid connections.
TEST(ServerSocket, ShutdownFlushesWhatConnectedClientsHoldAndConnectionsPerUidAreLimited) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  RunningServer s;
  ServerOptions options;
  options.max_clients_per_uid = 2;
  ASSERT_TRUE(s.start_on(path, options));
  s.resume();
  int a = connect_unix(path);
  int b = connect_unix(path);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_EQ(response_code_of(round_trip(a, primary_command())), 0u);
  ASSERT_EQ(response_code_of(round_trip(a, session_command())), 0u);
  ASSERT_EQ(response_code_of(round_trip(b, session_command())), 0u);
  int third = connect_unix(path);  // the same uid: refused
  ASSERT_GE(third, 0);
  EXPECT_TRUE(closed_by_server(third));
  ::close(third);
  s.pause();
  EXPECT_EQ(s.on_tpm().size(), 3u);
  s.destroy();
  EXPECT_TRUE(s.on_tpm().empty());
  ::close(a);
  ::close(b);
  std::filesystem::remove_all(dir);
}

// A front above each client's space (ServerOptions::client_front: where the
// server's CommandWrapper goes): every client command passes it, in the
// client's terms, and it is gone before the space when the client closes.
TEST(ServerSocket, ClientFrontSitsAboveTheSpace) {
  struct Counting final : Transport {
    explicit Counting(Transport& below, std::atomic<int>& n) : below_(below), n_(n) {}
    Result<Bytes> transmit(ByteView command) override {
      ++n_;
      return below_.transmit(command);
    }
    std::string describe() const override { return "counting"; }
    Transport& below_;
    std::atomic<int>& n_;
  };
  std::atomic<int> seen{0};
  std::atomic<int> fronts{0};
  ServerOptions options;
  options.client_front = [&](server::HandleSpace& space) -> Result<std::unique_ptr<Transport>> {
    ++fronts;
    return std::unique_ptr<Transport>(std::make_unique<Counting>(space, seen));
  };
  RunningServer s;
  ASSERT_TRUE(s.start(options));
  s.resume();
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ASSERT_TRUE(hand_over(s.server(), pair[1]).ok());
  Bytes created = round_trip(pair[0], primary_command());
  ASSERT_EQ(response_code_of(created), 0u);
  EXPECT_EQ(load_be32(created.data() + 10) >> 16, 0x80FFu);  // the space's virtual handle, through the front
  EXPECT_EQ(response_code_of(round_trip(pair[0], kGetRandom8)), 0u);
  ::close(pair[0]);
  s.settle();
  EXPECT_EQ(fronts.load(), 1);
  EXPECT_EQ(seen.load(), 2);
  EXPECT_TRUE(s.on_tpm().empty());
}

// tpmutil's EmulatorReadWriteCloser, as go-tpm's OpenTPM(path) uses it on
// a socket (go-tpm tpmutil/run_emu.go; tpmutil.RunCommand reads into 4096
// bytes): Write dials a new connection and writes the command, Read reads
// once and closes. A Transport so that Tpm runs typed commands through it.
class PerCommandSocket final : public Transport {
 public:
  explicit PerCommandSocket(std::string path) : path_(std::move(path)) {}
  Result<Bytes> transmit(ByteView command) override {
    const int fd = connect_unix(path_);
    if (fd < 0) return runtime_error("connect failed");
    Bytes out;
    if (::write(fd, command.data(), command.size()) == static_cast<ssize_t>(command.size())) {
      uint8_t buf[4096];
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n > 0) out.assign(buf, buf + n);
    }
    ::close(fd);
    if (out.size() < 10) return runtime_error("no answer");
    return out;
  }
  std::string describe() const override { return "per-command socket"; }
  bool private_handles() const override { return true; }

 private:
  std::string path_;
};

const Bytes kSecret = {'g', 'o', '-', 't', 'p', 'm'};

// In a child process: a primary, a sealed object created and loaded under
// it and unsealed, each command on a connection of its own. Written to
// `out`: 1 and the two handles on success, else 0. Returns the loaded
// object's handle (0: failed).
uint32_t per_command_client(const std::string& path, int out) {
  PerCommandSocket socket(path);
  Tpm tpm(socket);
  const Bytes& secret = kSecret;
  cmd::CreatePrimary primary;
  primary.primary_handle = NamedHandle::of(rh::kOwner);
  primary.in_public.public_area = null_key_template(SaltKind::kEcc);
  auto parent = tpm.run(primary, {Auth::password()});
  cmd::Create create;
  create.in_sensitive.data = secret;
  Public& p = create.in_public.public_area;
  p.type = alg::kKeyedHash;
  p.name_alg = alg::kSha256;
  p.attributes = object_attr::kFixedTpm | object_attr::kFixedParent | object_attr::kUserWithAuth;
  p.scheme = Scheme{alg::kNull, 0, 0};
  uint8_t report[9] = {0};
  if (parent.ok()) {
    create.parent_handle = NamedHandle::of(parent->object_handle);
    auto created = tpm.run(create, {Auth::password()});
    auto loaded = created.ok() ? tpm.run(cmd::Load{create.parent_handle, created->out_private, created->out_public},
                                         {Auth::password()})
                               : Result<cmd::Load::Response>(created.error());
    auto unsealed = loaded.ok() ? tpm.run(cmd::Unseal{NamedHandle::of(loaded->object_handle)}, {Auth::password()})
                                : Result<cmd::Unseal::Response>(loaded.error());
    if (unsealed.ok() && unsealed->out_data.bytes == secret) {
      report[0] = 1;
      store_be32(report + 1, parent->object_handle);
      store_be32(report + 5, loaded->object_handle);
    }
  }
  (void)!::write(out, report, sizeof(report));
  return load_be32(report + 5);
}

// Forks (the server's loop paused, so the child is this thread alone and
// may allocate) a program that runs `body` and then lives until `hold`'s
// write end is closed; its pid.
pid_t fork_program(RunningServer& s, int hold_read, const std::function<void()>& body) {
  s.pause();
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    char wait = 0;
    (void)!::read(hold_read, &wait, 1);
    ::_exit(0);
  }
  s.resume();
  return child;
}

// Until the server saw every close (its loop paused when it returns), at most 10 s.
void until_spaces(RunningServer& s, size_t spaces) {
  for (int i = 0; i < 200 && s.pause().spaces != spaces; ++i) {
    s.resume();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A program that connects once per command (go-tpm's OpenTPM on the
// socket) keeps its objects for as long as its process lives: CreatePrimary,
// Create, Load and Unseal on four connections work. Another process of the
// same uid has a space of its own and cannot use them; once the program is
// killed, the TPM (read past the server) holds none of its handles.
TEST(ServerSocket, AProgramConnectingPerCommandKeepsItsHandlesUntilItExits) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  RunningServer s;
  ASSERT_TRUE(s.start_on(path));
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  int hold[2];
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t child = fork_program(s, hold[0], [&] { per_command_client(path, report[1]); });
  ASSERT_GE(child, 0);
  ::close(report[1]);
  uint8_t got[9] = {0};
  ASSERT_EQ(::read(report[0], got, sizeof(got)), static_cast<ssize_t>(sizeof(got)));
  ::close(report[0]);
  EXPECT_EQ(got[0], 1) << "the per-command client failed";
  const uint32_t key = load_be32(got + 5);
  server::ServerStats stats = s.settle();  // its last connection's close seen
  EXPECT_EQ(stats.clients, 0u);
  EXPECT_EQ(stats.spaces, 1u);
  EXPECT_EQ(s.on_tpm().size(), 2u);  // its primary and its loaded object
  s.resume();
  // This process, the same uid: its own space, in which the key is no handle.
  PerCommandSocket other(path);
  Tpm tpm(other);
  auto read = tpm.run(cmd::ReadPublic{NamedHandle::of(key)});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().tpm_rc(), kHandle1);
  auto unseal = tpm.run(cmd::Unseal{NamedHandle::of(key)}, {Auth::password()});
  ASSERT_FALSE(unseal.ok());
  EXPECT_EQ(unseal.error().tpm_rc(), kHandle1);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(hold[0]);
  ::close(hold[1]);
  // Until the server saw it exit: only this process's space is left.
  until_spaces(s, 1);
  EXPECT_EQ(s.pause().spaces, 1u);
  EXPECT_TRUE(s.on_tpm().empty());
  std::filesystem::remove_all(dir);
}

// A uid keeps at most max_clients_per_uid spaces of processes that hold no
// connection: three programs that each made two objects and hold no
// connection, with room for two; the first's space ends (its objects
// flushed), the others' stay until they are killed.
TEST(ServerSocket, AUidKeepsAtMostMaxConnectionsSpacesWithoutAConnection) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  RunningServer s;
  ServerOptions options;
  options.max_clients_per_uid = 2;
  ASSERT_TRUE(s.start_on(path, options));
  int hold[2];
  ASSERT_EQ(::pipe(hold), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 3; ++i) {
    int report[2];
    ASSERT_EQ(::pipe(report), 0);
    const pid_t child = fork_program(s, hold[0], [&] { per_command_client(path, report[1]); });
    ASSERT_GE(child, 0);
    children.push_back(child);
    ::close(report[1]);
    uint8_t got[9] = {0};
    ASSERT_EQ(::read(report[0], got, sizeof(got)), static_cast<ssize_t>(sizeof(got)));
    ::close(report[0]);
    EXPECT_EQ(got[0], 1) << "client " << i << " failed";
    s.settle();  // its last connection's close seen
    s.resume();
  }
  const server::ServerStats kept = s.pause();
  EXPECT_EQ(kept.spaces, 2u);
  // The manager's entries: the two spaces and their four objects (loaded or
  // saved: libtpms has three slots).
  EXPECT_EQ(kept.handle_entries, 6u);
  s.resume();
  for (pid_t child : children) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
  ::close(hold[0]);
  ::close(hold[1]);
  until_spaces(s, 0);
  EXPECT_EQ(s.pause().spaces, 0u);
  EXPECT_TRUE(s.on_tpm().empty());
  std::filesystem::remove_all(dir);
}

constexpr uid_t kNobody = 65534;  // user nobody, group nogroup (Debian): another uid than the test's

// The server's log lines, kept for the test to read (the loop's thread writes them).
struct LogLines {
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(line);
    };
  }
  size_t count(const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<size_t>(
        std::count_if(lines.begin(), lines.end(), [&](const auto& l) { return l.find(part) != std::string::npos; }));
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

// A socket every local user reaches (tpmsec.socket lets its group's members
// in): 0666 in a directory others may pass through.
bool listen_for_everyone(RunningServer& s, const std::string& dir, const std::string& path) {
  return ::chmod(dir.c_str(), 0711) == 0 && socket_front::listen_unix(s.server(), path, {0666, ""}).ok();
}

bool become_nobody() { return ::setgroups(0, nullptr) == 0 && ::setgid(kNobody) == 0 && ::setuid(kNobody) == 0; }

// Another uid (nobody) as an attacker of a uid's kept space: it churns
// programs that each keep a space (objects made, connection closed, process
// alive) far past its bound of kept spaces, and holds every connection it
// may. uid A's program, whose space is kept the same way, still unseals its
// object on a new connection afterwards, and A's new connections are
// accepted: only nobody's own spaces ended, and only nobody was refused.
TEST(ServerSocket, AnotherUidChurningSpacesNeverEndsOrRefusesAUidsKeptSpace) {
  ASSERT_EQ(::geteuid(), 0u) << "the test runs as root (as CI does): its attacker runs as nobody";
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  LogLines log;
  ServerOptions options;
  options.max_clients_per_uid = 2;
  options.log = log.sink();
  RunningServer s;
  ASSERT_TRUE(s.start(options));
  ASSERT_TRUE(listen_for_everyone(s, dir, path));
  s.resume();
  int hold[2], report[2], go[2];
  ASSERT_EQ(::pipe(hold), 0);
  ASSERT_EQ(::pipe(report), 0);
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> children;
  uint8_t got[9] = {0};
  // uid A (root, the test's): a program that keeps its space, then unseals
  // once more on a new connection for every byte on `go`.
  children.push_back(fork_program(s, hold[0], [&] {
    const uint32_t key = per_command_client(path, report[1]);
    char again = 0;
    while (::read(go[0], &again, 1) == 1) {
      PerCommandSocket socket(path);
      auto unsealed = Tpm(socket).run(cmd::Unseal{NamedHandle::of(key)}, {Auth::password()});
      const uint8_t ok = unsealed.ok() && unsealed->out_data.bytes == kSecret;
      (void)!::write(report[1], &ok, 1);
    }
  }));
  ASSERT_EQ(::read(report[0], got, sizeof(got)), static_cast<ssize_t>(sizeof(got)));
  ASSERT_EQ(got[0], 1) << "uid A's program failed";
  const pid_t a = children.back();
  // uid B: programs that keep spaces, twice as many as it may keep.
  for (int i = 0; i < 4; ++i) {
    children.push_back(fork_program(s, hold[0], [&] {
      if (!become_nobody()) ::_exit(1);
      per_command_client(path, report[1]);
    }));
    ASSERT_EQ(::read(report[0], got, sizeof(got)), static_cast<ssize_t>(sizeof(got)));
    EXPECT_EQ(got[0], 1) << "uid B's program " << i << " failed";
    s.settle();  // its last connection's close seen
    s.resume();
  }
  // uid B holds every connection it may: its third is refused.
  children.push_back(fork_program(s, hold[0], [&] {
    if (!become_nobody()) ::_exit(1);
    const int first = connect_unix(path), second = connect_unix(path), third = connect_unix(path);
    uint8_t answered[3] = {response_code_of(round_trip(first, kGetRandom8)) == 0,
                           response_code_of(round_trip(second, kGetRandom8)) == 0, closed_by_server(third)};
    (void)!::write(report[1], answered, sizeof(answered));
  }));
  uint8_t held[3] = {0};
  ASSERT_EQ(::read(report[0], held, sizeof(held)), 3);
  EXPECT_EQ(held[0] + held[1], 2) << "uid B's two connections were not served";
  EXPECT_EQ(held[2], 1) << "uid B's third connection was not refused";

  // uid A: its kept space and a new connection of its.
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  uint8_t unsealed = 0;
  ASSERT_EQ(::read(report[0], &unsealed, 1), 1);
  EXPECT_EQ(unsealed, 1) << "uid A's kept object was lost to uid B's churn\n" << log.all();
  const int own = connect_unix(path);
  ASSERT_GE(own, 0);
  EXPECT_EQ(response_code_of(round_trip(own, kGetRandom8)), 0u) << "uid A's new connection was refused";
  ::close(own);
  EXPECT_EQ(log.count("the handle space of uid 65534 pid "), 2u) << log.all();
  EXPECT_EQ(log.count(fmt::format("the handle space of uid 0 pid {} ends", a)), 0u) << log.all();
  EXPECT_EQ(log.count("uid 0: "), 0u) << "a connection of uid A was refused\n" << log.all();

  for (pid_t child : children) ::kill(child, SIGKILL);
  for (pid_t child : children) ::waitpid(child, nullptr, 0);
  for (int fd : {hold[0], hold[1], report[0], report[1], go[0], go[1]}) ::close(fd);
  until_spaces(s, 1);
  EXPECT_EQ(s.pause().spaces, 1u);  // this test process's own, which lives on
  EXPECT_TRUE(s.on_tpm().empty());
  std::filesystem::remove_all(dir);
}

// A child made with the pid `pid` (clone3's set_tid, Linux 5.5; root): 0
// in the child, its pid in the parent, -1 when the kernel gave none.
pid_t fork_with_pid(pid_t pid) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uint64_t>(&pid);
  args.set_tid_size = 1;
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof(args)));
}

// uid A's process made a primary on a connection that outlives it (passed
// to this test process before it exited): A's space stays, reachable on that
// connection. A process of another uid (nobody), then one of A's own uid,
// each given A's very pid by the kernel, asks for A's primary on a
// connection of its own: TPM_RC_HANDLE, a space of its own (another uid; a
// process of another start time that came after A exited).
TEST(ServerSocket, AProcessGivenAnExitedProcesssPidNeverReachesItsSpace) {
  ASSERT_EQ(::geteuid(), 0u) << "the test runs as root (as CI does): set_tid and user nobody";
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  RunningServer s;
  ASSERT_TRUE(s.start());
  ASSERT_TRUE(listen_for_everyone(s, dir, path));
  s.resume();
  const Bytes primary = primary_command();
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  s.pause();
  const pid_t a = ::fork();
  ASSERT_GE(a, 0);
  if (a == 0) {
    // A: its connection and its primary's handle to the test, then gone.
    const int fd = connect_unix(path);
    Bytes made = round_trip(fd, primary);
    if (response_code_of(made) != 0) ::_exit(1);
    ::_exit(testing::send_fd(pair[1], fd, made.data() + 10, 4) ? 0 : 1);
  }
  s.resume();
  ::close(pair[1]);
  uint8_t handle[4] = {0};
  const int kept = testing::receive_fd(pair[0], handle, sizeof(handle));
  ::close(pair[0]);
  ASSERT_GE(kept, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(a, &status, 0), a);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const uint32_t key = load_be32(handle);
  CommandFrame frame;
  frame.code = cmd::ReadPublic::kInfo.code;
  frame.handles = {key};
  const Bytes ask = build_command(frame);
  // A's space lives on with the connection A left behind.
  EXPECT_EQ(response_code_of(round_trip(kept, ask)), 0u);

  for (const bool as_nobody : {true, false}) {
    SCOPED_TRACE(as_nobody ? "another uid" : "A's uid");
    int answer[2];
    ASSERT_EQ(::pipe(answer), 0);
    s.pause();  // the child makes nothing it did not have before
    const pid_t b = fork_with_pid(a);
    if (b == 0) {
      uint32_t code = 1;
      if (!as_nobody || become_nobody()) {
        const int fd = connect_unix(path);
        Bytes r = round_trip(fd, ask);
        code = r.size() >= 10 ? load_be32(r.data() + 6) : 2;
      }
      (void)!::write(answer[1], &code, sizeof(code));
      ::_exit(0);
    }
    s.resume();
    ASSERT_EQ(b, a) << "the kernel did not give the child A's pid: " << std::strerror(errno);
    ::close(answer[1]);
    uint32_t code = 0;
    ASSERT_EQ(::read(answer[0], &code, sizeof(code)), static_cast<ssize_t>(sizeof(code)));
    ::close(answer[0]);
    ::waitpid(b, nullptr, 0);
    EXPECT_EQ(code, kHandle1) << "a process given A's pid reached A's primary";
  }
  EXPECT_EQ(response_code_of(round_trip(kept, ask)), 0u);  // A's space still there, untouched
  ::close(kept);
  until_spaces(s, 0);
  EXPECT_TRUE(s.on_tpm().empty());
  std::filesystem::remove_all(dir);
}

// A server that knows its clients' processes `way`, its log in `log`,
// listening on `path`, its loop running.
bool start_with_pidfd_way(RunningServer& s, LogLines& log, server::PidfdWay way, const std::string& path) {
  ServerOptions options;
  options.pidfd_way = way;
  options.log = log.sink();
  if (!s.start_on(path, options)) return false;
  s.resume();
  return true;
}

// The pidfd of a peer from pidfd_open(2) (kernels before 6.5, which have no
// SO_PEERPIDFD) gives what the kernel's own gives in
// AProgramConnectingPerCommandKeepsItsHandlesUntilItExits: a program
// connecting once per command keeps one space, in which its commands work,
// and the space ends when the program is killed.
TEST(ServerSocket, PidfdOpenGivesTheSameSpaceAndExitAsSoPeerpidfd) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  LogLines log;
  RunningServer s;
  ASSERT_TRUE(start_with_pidfd_way(s, log, server::PidfdWay::kPidfdOpen, path));
  int hold[2], report[2];
  ASSERT_EQ(::pipe(hold), 0);
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = fork_program(s, hold[0], [&] { per_command_client(path, report[1]); });
  uint8_t got[9] = {0};
  ASSERT_EQ(::read(report[0], got, sizeof(got)), static_cast<ssize_t>(sizeof(got)));
  EXPECT_EQ(got[0], 1) << "the per-command client failed\n" << log.all();
  s.settle();
  EXPECT_EQ(s.pause().spaces, 1u);
  EXPECT_EQ(log.count("a handle space of its process (pidfd from pidfd_open)"), 1u) << log.all();
  EXPECT_GE(log.count("joins the handle space of client"), 3u) << log.all();
  EXPECT_EQ(s.on_tpm().size(), 2u);  // its primary and its loaded object
  s.resume();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  until_spaces(s, 0);
  EXPECT_EQ(s.pause().spaces, 0u);
  EXPECT_TRUE(s.on_tpm().empty());
  for (int fd : {hold[0], hold[1], report[0], report[1]}) ::close(fd);
  std::filesystem::remove_all(dir);
}

// Without a pidfd (a kernel before 5.3, or pidfd_open refused) nothing would
// tell a process from a later one of its pid once it exited: no space is
// shared, not even between two connections of this live process; each
// ends with its connection.
TEST(ServerSocket, WithoutAPidfdNoConnectionJoinsAnothersSpace) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/tpmrm.sock";
  LogLines log;
  RunningServer s;
  ASSERT_TRUE(start_with_pidfd_way(s, log, server::PidfdWay::kNone, path));
  const int first = connect_unix(path);
  ASSERT_GE(first, 0);
  Bytes made = round_trip(first, primary_command());
  ASSERT_EQ(response_code_of(made), 0u);
  const uint32_t key = load_be32(made.data() + 10);
  CommandFrame frame;
  frame.code = cmd::ReadPublic::kInfo.code;
  frame.handles = {key};
  const Bytes ask = build_command(frame);
  const int second = connect_unix(path);
  ASSERT_GE(second, 0);
  EXPECT_EQ(response_code_of(round_trip(second, ask)), kHandle1) << "a connection joined another's space\n"
                                                                 << log.all();
  EXPECT_EQ(response_code_of(round_trip(first, ask)), 0u);
  EXPECT_EQ(log.count("no pidfd (no pidfd asked for): a handle space of this connection's own"), 2u) << log.all();
  ::close(first);
  ::close(second);
  EXPECT_EQ(s.settle().spaces, 0u);  // each ended with its connection
  EXPECT_TRUE(s.on_tpm().empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tpmsec
