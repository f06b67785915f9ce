#include "support/raw_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>

#include "support/tpm_frames.h"
#include "tpmsec/constants.h"

namespace tpmsec::testing {

Bytes no_sessions_command(uint32_t code, const std::function<void(Writer&)>& body) {
  Writer w;
  w.u16(st::kNoSessions);
  auto size = w.begin_total_size32("commandSize");
  w.u32(code);
  body(w);
  w.end_size(size);
  return *w.finish();
}

Bytes with_handle(uint32_t code, uint32_t handle) {
  return no_sessions_command(code, [handle](Writer& w) { w.u32(handle); });
}

Bytes start_auth_session(uint8_t type) {
  return no_sessions_command(0x176, [type](Writer& w) {  // TPM_CC_StartAuthSession
    w.u32(rh::kNull);
    w.u32(rh::kNull);
    w.tpm2b(Bytes(16, 0x3c), "nonceCaller");
    w.u16(0);  // encryptedSalt
    w.u8(type);
    w.u16(alg::kNull);
    w.u16(alg::kSha256);
  });
}

Bytes create_hmac_primary(uint32_t attributes, ByteView unique) {
  Writer w;
  w.u16(4);  // inSensitive: empty userAuth, empty data
  w.u16(0);
  w.u16(0);
  Writer pub;
  pub.u16(0x0008);  // TPM_ALG_KEYEDHASH
  pub.u16(alg::kSha256);
  pub.u32(attributes);
  pub.u16(0);       // authPolicy
  pub.u16(0x0005);  // scheme: TPM_ALG_HMAC
  pub.u16(alg::kSha256);
  pub.tpm2b(unique, "unique");
  w.tpm2b(*pub.finish(), "inPublic");
  w.u16(0);                                                   // outsideInfo
  w.u32(0);                                                   // creationPCR
  return password_command(0x131, {rh::kOwner}, *w.finish());  // TPM_CC_CreatePrimary
}

Bytes hmac_with(uint32_t key) {
  Writer w;
  w.tpm2b(as_bytes("use it"), "buffer");
  w.u16(alg::kSha256);
  return password_command(0x155, {key}, *w.finish());  // TPM_CC_HMAC
}

uint32_t rc_of(ByteView response) { return response.size() < 10 ? 0xFFFFFFFFu : load_be32(response.data() + 6); }

int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

size_t transact_once(int fd, ByteView command, uint8_t* out, size_t cap) {
  if (::send(fd, command.data(), command.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(command.size())) return 0;
  size_t want = 10;
  for (size_t got = 0; got < want;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 60000) <= 0) return 0;
    ssize_t n = ::read(fd, out + got, want - got);
    if (n <= 0) return 0;
    got += static_cast<size_t>(n);
    if (got == 10) {
      want = load_be32(out + 2);
      if (want < 10 || want > cap) return 0;
    }
  }
  return want;
}

size_t transact(int fd, ByteView command, uint8_t* out, size_t cap) {
  for (int attempt = 0;; ++attempt) {
    size_t n = transact_once(fd, command, out, cap);
    if (n < 10 || load_be32(out + 6) != 0x922 || attempt == 8) return n;
  }
}

Bytes transact(int fd, ByteView command) {
  Bytes r(65536);
  r.resize(transact(fd, command, r.data(), r.size()));
  return r;
}

}  // namespace tpmsec::testing
