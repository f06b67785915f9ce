// A `tpmsec serve` server's Unix socket (transports.h, open_serve): the
// /dev/tpmrm0 protocol over a stream, so the response's length comes from its
// header (TPM 2.0 Part 1, 18.4: tag, size, code) instead of one read().
//
// Whom it trusts: the server puts its salted, anchored session on every
// command, so this link is what /dev/tpmrm0 is to the kernel's resource
// manager — local, and as trustworthy as whoever listens on it. Connecting
// therefore asks the kernel who that is (SO_PEERCRED, unix(7)): root, or the
// uid the server runs as (tss, as tpmsec.service's User=, or the uid= the TPM
// string names). Anyone else could have bound the path first (a stale
// /run/tpmsec, a socket in /tmp): refused before a byte is written.
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "tpmsec/frame_header.h"
#include "tpmsec/transport/socket_io.h"
#include "tpmsec/transport/transports.h"
#include "transport_limits.h"

namespace tpmsec {
namespace {

using transport_limits::kMaxResponse;
using transport_limits::kTimeoutMs;

// The tss user's uid, when the host has one (Debian's tpm2-tss package and
// tpmsec.service's User=tss).
std::optional<uint32_t> tss_uid() {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<size_t>(size) : 16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwnam_r("tss", &pw, buffer.data(), buffer.size(), &found) != 0 || !found) return std::nullopt;
  return static_cast<uint32_t>(pw.pw_uid);
}

// Whether the process listening on `fd`'s other end may be trusted as the
// server: root always (it could read /dev/tpm0 itself), else exactly the
// uid the address names, else the tss user.
Status check_peer(int fd, const ServeAddress& address) {
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || len != sizeof(peer)) {
    return runtime_error(fmt::format("serve:path={}: cannot ask who listens: {}", address.path, std::strerror(errno)));
  }
  if (peer.uid == 0) return ok_status();
  std::optional<uint32_t> expected = address.uid ? address.uid : tss_uid();
  if (expected && peer.uid == *expected) return ok_status();
  // kRuntime, as a socket nobody listens on: no TPM was reached.
  return runtime_error(fmt::format(
      "serve:path={}: the socket is served by uid {} (pid {}), not by root or {}: refusing a server another user "
      "could have planted (name its uid with serve:path={},uid=N if it is yours)",
      address.path, peer.uid, peer.pid,
      address.uid ? fmt::format("uid {}", *address.uid)
      : expected  ? fmt::format("tss (uid {})", *expected)
                  : "tss",
      address.path));
}

// Reads exactly out.size() bytes by `deadline`: one deadline for the whole
// response, so a server that trickles bytes cannot stretch the wait.
Status read_by(int fd, MutableByteView out, std::chrono::steady_clock::time_point deadline, const std::string& what) {
  size_t done = 0;
  while (done < out.size()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return runtime_error(fmt::format("{} did not answer within {} ms", what, kTimeoutMs));
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return runtime_error(fmt::format("cannot wait for {}: {}", what, std::strerror(errno)));
    if (ready == 0) continue;  // the deadline, checked above
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return runtime_error(fmt::format("cannot read from {}: {}", what, std::strerror(errno)));
    if (n == 0) return runtime_error(fmt::format("{} closed the connection", what));
    done += static_cast<size_t>(n);
  }
  return ok_status();
}

class ServeTransport final : public Transport {
 public:
  ServeTransport(io::Fd fd, ServeAddress address) : fd_(std::move(fd)), address_(std::move(address)) {}

  Result<Bytes> transmit(ByteView command) override {
    if (!fd_.valid()) return runtime_error(describe() + ": the connection was lost earlier");
    Result<Bytes> out = exchange(command);
    // A half-read response leaves the stream out of step: never reused.
    if (!out.ok()) fd_ = io::Fd();
    return out;
  }

  std::string describe() const override { return tpm_string_of(address_); }
  // The server gives each connection a handle space of its own and flushes
  // it when the connection closes (tpmsec-server/resource_manager/server.h).
  bool private_handles() const override { return true; }

 private:
  Result<Bytes> exchange(ByteView command) {
    const std::string what = describe();
    TPMSEC_RETURN_IF_ERROR(io::write_all(fd_.get(), command, what));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs);
    return read_stream_frame([&](MutableByteView into) { return read_by(fd_.get(), into, deadline, what); },
                             kMaxResponse, what);
  }

  io::Fd fd_;
  ServeAddress address_;
};

}  // namespace

Result<std::unique_ptr<Transport>> open_serve(const ServeAddress& address) {
  TPMSEC_ASSIGN_OR_RETURN(io::Fd fd, io::connect_unix(address.path, "serve:path=" + address.path));
  TPMSEC_RETURN_IF_ERROR(check_peer(fd.get(), address));
  return std::unique_ptr<Transport>(std::make_unique<ServeTransport>(std::move(fd), address));
}

}  // namespace tpmsec
