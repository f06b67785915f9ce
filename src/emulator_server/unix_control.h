// swtpm's control channel on a Unix socket (`swtpm socket --ctrl
// type=unixio,path=S`), as qemu's tpm-emulator backend drives it
// (qemu's backends/tpm/tpm_emulator.c): the channel's requests framed as
// the ptm_* structures (ControlFraming::kStructs), and CMD_SET_DATAFD
// carrying the data channel's descriptor as SCM_RIGHTS ancillary data.
//
// The socket is created 0600 (no window: bound under umask 0777); one
// connection is served at a time, the next waiting in the backlog (qemu
// keeps one open). A request is bounded by the channel's codec before it is
// read; a client that stalls mid-request, or leaves its answer unread, for
// frame_timeout_ms is dropped. At most one descriptor is kept per request:
// any other that comes with it, and one that no CMD_SET_DATAFD takes, is
// closed at once. Runs on a thread of its own (serve()).
#ifndef TPMSEC_SRC_EMULATOR_SERVER_UNIX_CONTROL_H_
#define TPMSEC_SRC_EMULATOR_SERVER_UNIX_CONTROL_H_

#include <functional>
#include <memory>
#include <string>

#include "emulator_server/channel.h"
#include "tpmsec/result.h"
#include "tpmsec/unique_fd.h"

namespace tpmsec::emulation {

class UnixControl {
 public:
  using Log = std::function<void(const std::string&)>;
  // Serves one whole request; `fd` is the descriptor that came with it
  // (invalid when none), for CMD_SET_DATAFD to take.
  using Serve = std::function<Served(ByteView request, UniqueFd& fd)>;

  // Binds `path` (a socket file there is replaced, anything else refused).
  static Result<std::unique_ptr<UnixControl>> bind(const std::string& path, int frame_timeout_ms, Log log);
  ~UnixControl();  // closes the socket and removes its file

  using Stopped = std::function<bool()>;
  // Until `stopped()` (asked at least every 200 ms).
  void serve(const Stopped& stopped, const Channel& channel, const Serve& serve_request);

  const std::string& path() const { return path_; }

 private:
  UnixControl(std::string path, UniqueFd listener, int frame_timeout_ms, Log log)
      : path_(std::move(path)), listener_(std::move(listener)), timeout_ms_(frame_timeout_ms), log_(std::move(log)) {}
  // One connection until it closes, is dropped or `stop`.
  void serve_connection(UniqueFd conn, const Stopped& stopped, const Channel& channel, const Serve& serve);
  bool send_all(int fd, ByteView answer, const Stopped& stopped);

  std::string path_;
  UniqueFd listener_;
  int timeout_ms_;
  Log log_;
};

}  // namespace tpmsec::emulation

#endif  // TPMSEC_SRC_EMULATOR_SERVER_UNIX_CONTROL_H_
