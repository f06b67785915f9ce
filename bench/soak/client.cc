#include "soak/client.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <tss2/tss2_tcti.h>

#include "tpmsec/wire.h"

namespace tpmsec::soak {
namespace {

constexpr int kAnswerMs = 120000;  // longer than any stall the soak makes
constexpr size_t kMaxResponse = 4096;

class SocketConnection : public Connection {
 public:
  explicit SocketConnection(int fd) : fd_(fd) {}
  ~SocketConnection() override { ::close(fd_); }
  std::optional<Bytes> transact(ByteView command) override {
    if (::send(fd_, command.data(), command.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(command.size())) {
      return std::nullopt;
    }
    Bytes out(10);
    size_t want = 10;
    for (size_t got = 0; got < want;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, kAnswerMs) <= 0) return std::nullopt;
      ssize_t n = ::read(fd_, out.data() + got, want - got);
      if (n <= 0) return std::nullopt;
      got += static_cast<size_t>(n);
      if (got == 10) {
        want = load_be32(out.data() + 2);
        if (want < 10 || want > kMaxResponse) return std::nullopt;
        out.resize(want);
      }
    }
    return out;
  }
  void send_only(ByteView command) override { (void)!::send(fd_, command.data(), command.size(), MSG_NOSIGNAL); }

 private:
  int fd_;
};

class DbusConnection : public Connection {
 public:
  explicit DbusConnection(TSS2_TCTI_CONTEXT* ctx) : ctx_(ctx) {}
  ~DbusConnection() override {
    Tss2_Tcti_Finalize(ctx_);
    std::free(ctx_);
  }
  std::optional<Bytes> transact(ByteView command) override {
    if (Tss2_Tcti_Transmit(ctx_, command.size(), command.data()) != TSS2_RC_SUCCESS) return std::nullopt;
    Bytes out(kMaxResponse);
    size_t n = out.size();
    if (Tss2_Tcti_Receive(ctx_, &n, out.data(), kAnswerMs) != TSS2_RC_SUCCESS) return std::nullopt;
    out.resize(n);
    return out;
  }
  void send_only(ByteView command) override { (void)Tss2_Tcti_Transmit(ctx_, command.size(), command.data()); }

 private:
  TSS2_TCTI_CONTEXT* ctx_;
};

}  // namespace

std::unique_ptr<Connection> connect_socket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return nullptr;
  }
  return std::make_unique<SocketConnection>(fd);
}

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::unique_ptr<Connection> connect_tcp(uint16_t port) {
  int fd = connect_loopback(port);
  return fd < 0 ? nullptr : std::make_unique<SocketConnection>(fd);
}

std::unique_ptr<Connection> connect_dbus() {
  void* lib = ::dlopen("libtss2-tcti-tabrmd.so.0", RTLD_NOW);
  if (!lib) return nullptr;
  auto info_fn = reinterpret_cast<TSS2_TCTI_INFO_FUNC>(::dlsym(lib, TSS2_TCTI_INFO_SYMBOL));
  const TSS2_TCTI_INFO* info = info_fn ? info_fn() : nullptr;
  size_t size = 0;
  if (!info || info->init(nullptr, &size, "bus_type=session") != TSS2_RC_SUCCESS) return nullptr;
  auto* ctx = static_cast<TSS2_TCTI_CONTEXT*>(std::calloc(1, size));
  if (info->init(ctx, &size, "bus_type=session") != TSS2_RC_SUCCESS) {
    std::free(ctx);
    return nullptr;
  }
  return std::make_unique<DbusConnection>(ctx);
}

}  // namespace tpmsec::soak
