#include "support/interposer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "tpmsec/transport/socket_io.h"
#include "tpmsec/wire.h"

namespace tpmsec::testing {
namespace {

constexpr size_t kHeaderSize = 10;
constexpr uint32_t kMaxFrame = 64 * 1024;  // as the swtpm transport bounds responses
constexpr int kUpstreamTimeoutMs = 30'000;
constexpr int kClientBodyTimeoutMs = 10'000;  // the rest of a frame whose header arrived

// Waits until `fd` is readable or `wake` fires: true for readable.
bool wait_readable(int fd, int wake, int timeout_ms = -1) {
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
    int n = ::poll(p, 2, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || (p[1].revents & (POLLIN | POLLHUP))) return false;
    return true;
  }
}

// Sleeps up to `ms`; true when `wake` fired first.
bool woken_within(int wake, int ms) {
  pollfd p{wake, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, ms);
  } while (n < 0 && errno == EINTR);
  return n > 0;
}

// The size field of a frame header, checked against the bounds.
Result<uint32_t> frame_size(ByteView header) {
  Reader r(header);
  r.u16("tag");
  uint32_t size = r.u32("size");
  r.u32("code");
  TPMSEC_RETURN_IF_ERROR(r.status());
  if (size < kHeaderSize || size > kMaxFrame) return parse_error(fmt::format("frame size {}", size));
  return size;
}

// One frame from `fd`: the header, then as many bytes as it says.
Result<Bytes> read_frame(int fd, int timeout_ms, const std::string& what) {
  Bytes frame(kHeaderSize);
  TPMSEC_RETURN_IF_ERROR(io::read_exact(fd, frame, timeout_ms, what));
  TPMSEC_ASSIGN_OR_RETURN(uint32_t size, frame_size(frame));
  frame.resize(size);
  TPMSEC_RETURN_IF_ERROR(io::read_exact(fd, MutableByteView(frame).subspan(kHeaderSize), timeout_ms, what));
  return frame;
}

// swtpm, reached at a client's first command.
class SwtpmUpstream final : public Upstream {
 public:
  explicit SwtpmUpstream(uint16_t port) : port_(port) {}
  Result<Bytes> transmit(ByteView command) override {
    if (!fd_.valid()) {
      TPMSEC_ASSIGN_OR_RETURN(fd_, io::connect_tcp("127.0.0.1", port_, "swtpm behind the interposer"));
    }
    TPMSEC_RETURN_IF_ERROR(io::write_all(fd_.get(), command, "swtpm behind the interposer"));
    return read_frame(fd_.get(), kUpstreamTimeoutMs, "swtpm behind the interposer");
  }

 private:
  uint16_t port_;
  io::Fd fd_;
};

}  // namespace

Reply pass(const ProxiedCommand& command, Upstream& tpm) {
  auto response = tpm.transmit(command.bytes);
  if (!response.ok()) return Reply::close();
  return Reply::answer(std::move(*response));
}

Status Interposer::start() {
  if (thread_.joinable()) return usage_error("the interposer is already running");
  if (::pipe2(wake_, O_CLOEXEC) != 0) return runtime_error("pipe2 failed");
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;  // the kernel picks a free port
  socklen_t len = sizeof(a);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 4) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return runtime_error(fmt::format("cannot listen on loopback: {}", std::strerror(errno)));
  }
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { run(); });
  return ok_status();
}

void Interposer::stop() {
  if (thread_.joinable()) {
    char c = 0;
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_[0], &wake_[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

std::string Interposer::spec() const { return fmt::format("swtpm:host=127.0.0.1,port={}", port_); }

void Interposer::set_rule(Rule rule) {
  std::lock_guard<std::mutex> lock(mu_);
  rule_ = std::move(rule);
}

void Interposer::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return !busy_; });
}

size_t Interposer::commands() const {
  std::lock_guard<std::mutex> lock(mu_);
  return commands_;
}

size_t Interposer::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return connections_;
}

void Interposer::run() {
  for (;;) {
    if (!wait_readable(listen_fd_, wake_[0])) return;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = true;
    }
    serve(client);
    ::close(client);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      ++connections_;
    }
    idle_cv_.notify_all();
  }
}

void Interposer::serve(int client) {
  SwtpmUpstream upstream(upstream_port_);
  size_t connection;
  {
    std::lock_guard<std::mutex> lock(mu_);
    connection = connections_;
  }
  for (size_t in_connection = 0;; ++in_connection) {
    // Between commands the client may take as long as it likes; a frame
    // whose header arrived must follow promptly.
    if (!wait_readable(client, wake_[0])) return;
    auto frame = read_frame(client, kClientBodyTimeoutMs, "interposer client");
    if (!frame.ok()) return;
    ProxiedCommand command;
    command.in_connection = in_connection;
    command.connection = connection;
    command.code = load_be32(frame->data() + 6);
    command.bytes = std::move(*frame);
    Rule rule;
    {
      std::lock_guard<std::mutex> lock(mu_);
      command.index = commands_++;
      rule = rule_;
    }
    Reply reply = rule ? rule(command, upstream) : pass(command, upstream);
    if (reply.delay.count() > 0 && woken_within(wake_[0], static_cast<int>(reply.delay.count()))) return;
    if (!reply.response) return;
    if (!io::write_all(client, *reply.response, "interposer client").ok()) return;
  }
}

}  // namespace tpmsec::testing
